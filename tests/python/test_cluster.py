"""mcstore.Store and the adapters against 3-agent clusters on loopback: mc-master, data
nodes A and C, client node B. Objects put through one node are read through the others.
For the pins, C holds no memory either (--dram 0), so that every object lives on A and
churn through any node evicts from A's segment: pins taken through B hold objects against
it, and end with release() and with SIGKILL of the pinning process."""

import asyncio
import os
import signal
import subprocess
import sys
import unittest

import mcstore
from mcenv import Cluster, poll_until
from mcstore.lmcache import McStoreConnector
from mcstore.sglang import McStoreHiCache
from mcstore.vllm import McStoreOffloadingManager
from test_adapters import HostPool

MiB = 1 << 20


class _ClusterCase(unittest.TestCase):
    """A cluster per class (C_DRAM: C's memory), a Store on every node per test."""

    C_DRAM = "16M"

    @classmethod
    def setUpClass(cls):
        cls.cl = Cluster("16M", c_dram=cls.C_DRAM)
        cls.blob = os.urandom(MiB)

    @classmethod
    def tearDownClass(cls):
        sts = cls.cl.stop()
        assert sts == [0, 0, 0, 0], f"daemons did not exit cleanly: {sts}"

    def setUp(self):
        self.s = {n: mcstore.Store(self.cl.sock(n)) for n in "ABC"}
        self.n = 0

    def tearDown(self):
        for s in self.s.values():
            s.close()

    def churn(self, n=40):
        """Through A and C: more than both pools hold."""
        for i in range(n):
            node = "A" if i % 2 == 0 else "C"
            self.s[node].put(f"churn/{self._testMethodName}/{self.n}", self.blob)
            self.n += 1

    def present(self, keys):
        return sum(self.s["B"].batch_is_exist(keys))


class ClusterTest(_ClusterCase):
    """Data on A and C."""

    def test_every_node_reads_every_node(self):
        for i, w in enumerate("ABC"):
            self.s[w].put(f"x/{w}", self.blob[: 1000 + i])
        for r in "ABC":
            for i, w in enumerate("ABC"):
                self.assertEqual(self.s[r].get(f"x/{w}"), self.blob[: 1000 + i])
        buf = self.s["B"].alloc_buffer(MiB)
        self.assertEqual(self.s["B"].batch_get_into(["x/A", "x/none"], [buf, buf],
                                                    [MiB, MiB]),
                         [1000, mcstore.ERR_NOT_FOUND])
        self.assertEqual(self.s["C"].put("x/A", b"v", exists_ok=True), mcstore.PRESENT)
        self.assertEqual(self.s["A"].put("x/two", b"v", replicas=2), 0)
        with self.assertRaises(mcstore.NoSpace):
            self.s["A"].put("x/three", b"v", replicas=3)  # two data nodes
        f = self.s["C"].get_into_async("x/B", bytearray(2000), 2000)
        self.assertEqual(f.result(10), 1001)
        self.assertEqual(self.s["B"].remove_prefix("x/"), 4)
        self.assertIn("objects", self.s["B"].stats())

    def test_adapters_across_nodes(self):
        # SGLang: one TP rank backs up through A, another instance prefetches through C
        pool = HostPool(pages=4, page_bytes=64 * 1024)
        keys = [f"h{i}" for i in range(2)]
        for p in range(2):
            pool.fill(p, 40 + p)
        a = McStoreHiCache({"model_name": "m"}, socket=self.cl.sock("A"))
        c = McStoreHiCache({"model_name": "m"}, socket=self.cl.sock("C"))
        a.register_mem_pool_host(pool)
        c.register_mem_pool_host(pool)
        self.assertEqual(a.batch_set_v1(keys, pool.indices([0, 1])), [True, True])
        self.assertEqual(c.batch_exists(keys), 2)
        self.assertEqual(c.batch_get_v1(keys, pool.indices([2, 3])), [True, True])
        self.assertEqual(pool.page(2), pool.page(0))
        a.close()
        c.close()
        # vLLM: stored through A, looked up and loaded through B
        ma = McStoreOffloadingManager(16, socket=self.cl.sock("A"))
        mb = McStoreOffloadingManager(16, socket=self.cl.sock("B"))
        hs = [b"\x01" * 16, b"\x02" * 16]
        out = ma.prepare_store(hs)
        ma.store.batch_put_from(out.store_spec.keys, [self.blob] * 2, [4096] * 2)
        ma.complete_store(hs)
        self.assertEqual(mb.lookup(hs), 2)
        spec = mb.prepare_load(hs)
        dst = [bytearray(4096), bytearray(4096)]
        self.assertEqual(mb.store.batch_get_into(spec.keys, dst, [4096] * 2), [4096] * 2)
        mb.complete_load(hs)
        ma.close()
        mb.close()

        # LMCache: put through C, lookup-and-lock and get through B
        async def lm():
            pc = McStoreConnector(socket=self.cl.sock("C"), namespace="lm/")
            pb = McStoreConnector(socket=self.cl.sock("B"), namespace="lm/")
            await pc.put("c0", self.blob[:5000])
            self.assertEqual(await pb.batched_async_contains(7, ["c0"], pin=True), 1)
            self.assertEqual(await pb.get("c0"), self.blob[:5000])
            self.assertEqual(pb.batched_unpin(7), 1)
            self.assertIn("c0", await pb.list())
            await pc.close()
            await pb.close()

        asyncio.run(lm())


class PinClusterTest(_ClusterCase):
    """Pins across nodes; every object on A."""

    C_DRAM = "0"

    def test_pins_across_nodes(self):
        keys = [f"p/{i}" for i in range(4)]
        for i, k in enumerate(keys):
            self.s["AC"[i % 2]].put(k, self.blob)  # through A and C, onto A
        n, pin = self.s["B"].prefix_pin(keys + ["p/none"])
        self.assertEqual(n, 4)
        self.churn()
        self.assertEqual(self.present(keys), 4)
        self.assertEqual(self.s["B"].touch(keys), 4)
        self.assertEqual(pin.release(), 4)
        self.churn(40)  # touched just now: a second chance takes another turn of the hand
        self.assertEqual(self.present(keys), 0)

    def test_pins_released_when_pinner_killed(self):
        keys = [f"k/{i}" for i in range(4)]
        for k in keys:
            self.s["A"].put(k, self.blob)
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time, mcstore\n"
             "s = mcstore.Store(sys.argv[1])\n"
             "print(s.prefix_pin(sys.argv[2:])[0], flush=True)\n"
             "time.sleep(3600)\n",
             self.cl.sock("B"), *keys], stdout=subprocess.PIPE, env=os.environ)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"4")
            self.churn()
            self.assertEqual(self.present(keys), 4)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        self.assertTrue(poll_until(lambda: self.present(keys) == 0, 20,
                                   lambda: self.churn(8)))


if __name__ == "__main__":
    unittest.main()

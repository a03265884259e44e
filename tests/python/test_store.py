"""mcstore.Store against a real standalone mc-agent: every method and its errors, async ops
from threads and asyncio, buffer ownership under cancel and timeout, pins released when the
pinning process is killed."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import mcstore
from mcenv import Agent, poll_until

MiB = 1 << 20


class StoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.agent = Agent("64M")

    @classmethod
    def tearDownClass(cls):
        assert cls.agent.stop() == 0, "the agent did not exit cleanly"

    def setUp(self):
        self.s = mcstore.Store(self.agent.sock)
        self.p = f"{self._testMethodName}/"

    def tearDown(self):
        self.s.close()

    def k(self, name):
        return self.p + str(name)

    def test_put_get_exist_size_remove(self):
        s, k = self.s, self.k("a")
        self.assertEqual(s.put(k, b"hello"), 0)
        self.assertEqual(s.get(k), b"hello")
        self.assertEqual(s.is_exist(k), 1)
        self.assertEqual(s.get_size(k), 5)
        with self.assertRaises(mcstore.Exists) as cm:
            s.put(k, b"other")
        self.assertEqual(cm.exception.code, mcstore.ERR_EXISTS)
        self.assertIsInstance(cm.exception, mcstore.Error)
        self.assertEqual(s.put(k, b"other", exists_ok=True), mcstore.PRESENT)
        self.assertEqual(s.put(k, b"newer", upsert=True), 0)
        self.assertEqual(s.get(k), b"newer")
        s.remove(k)
        self.assertEqual(s.is_exist(k), 0)
        with self.assertRaises(mcstore.NotFound):
            s.get(k)
        with self.assertRaises(mcstore.NotFound):
            s.remove(k)
        with self.assertRaises(mcstore.NotFound):
            s.get_size(k)

    def test_large_get_grows_its_buffer(self):
        data = os.urandom(3 * MiB + 17)
        self.s.put(self.k("big"), data)
        self.assertEqual(self.s.get(self.k("big")), data)

    def test_put_options(self):
        s = self.s
        s.put(self.k("ttl"), b"x", ttl_ms=100000, pin="soft")
        s.put(self.k("hard"), b"x", pin="hard")
        self.assertEqual(s.is_exist(self.k("ttl")), 1)
        with self.assertRaises(ValueError):
            s.put(self.k("bad"), b"x", pin="never")
        with self.assertRaises(mcstore.Invalid):
            s.put(self.k("ttl2"), b"x", ttl_ms=1 << 62)
        with self.assertRaises(mcstore.NoSpace):
            s.put(self.k("reps"), b"x", replicas=2)  # one node: one failure domain

    def test_invalid_keys_and_buffers(self):
        s = self.s
        for bad in ("", "x" * 513, "a\0b", b""):
            with self.assertRaises(mcstore.Invalid):
                s.put(bad, b"x")
            with self.assertRaises(mcstore.Invalid):
                s.get(bad)
        with self.assertRaises(TypeError):
            s.is_exist(5)
        with self.assertRaises(mcstore.Invalid):
            s.get_into(self.k("a"), bytearray(4), 8)  # buffer smaller than size
        with self.assertRaises(mcstore.Invalid):
            s.get_into(self.k("a"), b"read-only", 4)
        self.assertEqual(mcstore.strerror(mcstore.ERR_NOT_FOUND), "object not found")

    def test_put_from_get_into_zero_copy(self):
        s = self.s
        buf = s.alloc_buffer(MiB)
        self.assertEqual(len(buf), MiB)
        buf[:] = os.urandom(MiB)
        self.assertEqual(s.put_from(self.k("z"), buf, MiB), 0)
        out = s.alloc_buffer(MiB)
        self.assertEqual(s.get_into(self.k("z"), mcstore.address_of(out), MiB), MiB)
        self.assertEqual(bytes(out), bytes(buf))
        small = bytearray(16)
        with self.assertRaises(mcstore.TooLarge):
            s.get_into(self.k("z"), small, 16)
        # plain memory works too (any buffer)
        plain = bytearray(MiB)
        self.assertEqual(s.get_into(self.k("z"), plain, MiB), MiB)
        self.assertEqual(bytes(plain), bytes(buf))
        s.free_buffer(buf)
        s.free_buffer(mcstore.address_of(out))
        with self.assertRaises(mcstore.Invalid):
            s.free_buffer(plain)

    def test_register_buffer(self):
        s = self.s
        mem = bytearray(4096)
        addr = mcstore.address_of(mem)
        self.assertEqual(s.register_buffer(addr, 4096), 0)
        mem[:3] = b"abc"
        s.put_from(self.k("r"), addr, 3)
        self.assertEqual(s.get(self.k("r")), b"abc")
        self.assertEqual(s.unregister_buffer(addr), 0)
        with self.assertRaises(mcstore.Invalid):
            s.unregister_buffer(addr)

    def test_batches_report_each_item(self):
        s = self.s
        bufs = [s.alloc_buffer(1000) for _ in range(3)]
        for i, b in enumerate(bufs):
            b[:] = bytes([i]) * 1000
        keys = [self.k(0), self.k(1), ""]
        s.put(keys[0], b"x" * 1000)
        res = s.batch_put_from(keys, bufs, [1000] * 3)
        self.assertEqual(res, [mcstore.ERR_EXISTS, 0, mcstore.ERR_INVALID])
        res = s.batch_put_from(keys, bufs, [1000] * 3, exists_ok=True)
        self.assertEqual(res, [mcstore.PRESENT, mcstore.PRESENT, mcstore.ERR_INVALID])
        outs = [s.alloc_buffer(1000) for _ in range(3)]
        res = s.batch_get_into([self.k(1), self.k("missing"), self.k(0)], outs,
                               [1000, 1000, 10])
        self.assertEqual(res, [1000, mcstore.ERR_NOT_FOUND, mcstore.ERR_TOO_LARGE])
        self.assertEqual(bytes(outs[0]), bytes([1]) * 1000)
        self.assertEqual(s.batch_is_exist([self.k(0), self.k("missing"), ""]),
                         [1, 0, mcstore.ERR_INVALID])
        self.assertEqual(s.batch_is_exist([]), [])
        with self.assertRaises(mcstore.Invalid):
            s.batch_get_into([self.k(0)], [], [])

    def test_prefix_match_pin_touch(self):
        s = self.s
        keys = [self.k(i) for i in range(5)]
        for i in (0, 1, 3):
            s.put(keys[i], b"v")
        self.assertEqual(s.prefix_match(keys), 2)
        self.assertEqual(s.prefix_match(keys), 2)  # no side effect
        n, pin = s.prefix_pin(keys)
        self.assertEqual((n, pin.count), (2, 2))
        self.assertFalse(pin.released)
        self.assertEqual(pin.release(), 2)
        self.assertEqual(pin.release(), 0)
        with s.prefix_pin(keys[:2])[1] as p:
            self.assertEqual(p.count, 2)
        self.assertTrue(p.released)
        self.assertEqual(s.touch(keys), 3)
        self.assertEqual(s.touch([]), 0)
        self.assertEqual(s.prefix_match([]), 0)
        with self.assertRaises(mcstore.Invalid):
            s.prefix_pin([keys[0], ""])

    def test_remove_prefix_and_stats(self):
        s = self.s
        for i in range(4):
            s.put(self.k(i), b"v")
        self.assertEqual(s.remove_prefix(self.p), 4)
        self.assertEqual(s.remove_prefix(self.p), 0)
        st = s.stats()
        self.assertIn("objects", st)
        self.assertIsInstance(st["capacity_bytes"], int)
        self.assertEqual(s.status(), 0)
        self.assertGreaterEqual(s.eventfd(), 0)

    def test_closed_store_refuses(self):
        s = mcstore.Store(self.agent.sock)
        with s:
            s.put(self.k("c"), b"v")
        with self.assertRaises(mcstore.Invalid):
            s.get(self.k("c"))
        s.close()  # idempotent

    def test_connect_errors(self):
        with self.assertRaises(mcstore.Unavailable):
            mcstore.Store(self.agent.sock + ".nothing")
        with self.assertRaises(mcstore.Invalid):
            mcstore.Store("x" * 200)

    def test_async_from_threads(self):
        s = self.s
        buf = s.alloc_buffer(64 * 1024)
        buf[:] = os.urandom(len(buf))
        futs = [s.put_from_async(self.k(i), buf, len(buf)) for i in range(32)]
        self.assertEqual([f.result(10) for f in futs], [0] * 32)
        f = s.put_from_async(self.k(0), buf, len(buf), exists_ok=True)
        self.assertEqual(f.result(10), mcstore.PRESENT)
        outs = [bytearray(len(buf)) for _ in range(8)]
        results = []

        def reader(i):
            results.append(s.get_into_async(self.k(i), outs[i], len(buf)).result(10))

        ts = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results, [len(buf)] * 8)
        self.assertTrue(all(bytes(o) == bytes(buf) for o in outs))
        f = s.get_into_async(self.k("missing"), outs[0], 10)
        with self.assertRaises(mcstore.NotFound):
            f.result(10)

    def test_async_from_asyncio(self):
        s = self.s
        data = bytearray(os.urandom(100000))

        async def main():
            await s.put_from_async(self.k("aio"), data, len(data))
            outs = [bytearray(len(data)) for _ in range(16)]
            got = await asyncio.gather(*(s.get_into_async(self.k("aio"), o, len(o))
                                         for o in outs))
            return got, outs

        got, outs = asyncio.run(main())
        self.assertEqual(got, [len(data)] * 16)
        self.assertTrue(all(o == data for o in outs))

    def test_close_ends_pending_async(self):
        s = mcstore.Store(self.agent.sock)
        s.put(self.k("p"), b"v" * 1000)
        futs = [s.get_into_async(self.k("p"), bytearray(1000), 1000) for _ in range(50)]
        s.close()
        for f in futs:
            self.assertTrue(f.done())
            if f.exception() is None:
                self.assertEqual(f.result(), 1000)
            else:
                self.assertIsInstance(f.exception(), mcstore.Canceled)


class PinKillTest(unittest.TestCase):
    """A small pool: pinned objects survive churn, and are evictable once the pinning
    process is killed with SIGKILL."""

    CHILD = r"""
import sys, time, mcstore
s = mcstore.Store(sys.argv[1])
n, pin = s.prefix_pin(sys.argv[2:])
print(n, flush=True)
time.sleep(3600)
"""

    def setUp(self):
        self.agent = Agent("16M")
        self.s = mcstore.Store(self.agent.sock)
        self.data = os.urandom(MiB)
        self.next = 0

    def tearDown(self):
        self.s.close()
        self.assertEqual(self.agent.stop(), 0)

    def churn(self, n):
        for _ in range(n):
            self.s.put(f"churn/{self.next}", self.data)
            self.next += 1

    def present(self, keys):
        return sum(self.s.batch_is_exist(keys))

    def test_pins_released_when_pinner_killed(self):
        keys = [f"pinned/{i}" for i in range(4)]
        for k in keys:
            self.s.put(k, self.data)
        child = subprocess.Popen([sys.executable, "-c", self.CHILD, self.agent.sock, *keys],
                                 stdout=subprocess.PIPE, env=os.environ)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"4")
            self.churn(40)
            self.assertEqual(self.present(keys), 4)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        self.assertEqual(poll_until(lambda: self.present(keys) == 0, 10,
                                    lambda: self.churn(8)), True)

    def test_pin_release_makes_evictable(self):
        keys = [f"pinned/{i}" for i in range(4)]
        for k in keys:
            self.s.put(k, self.data)
        n, pin = self.s.prefix_pin(keys)
        self.assertEqual(n, 4)
        self.churn(40)
        self.assertEqual(self.present(keys), 4)
        pin.release()
        self.churn(40)
        self.assertEqual(self.present(keys), 0)


class OwnershipTest(unittest.TestCase):
    """Buffers of async ops under cancel and timeout: never written once the op is final.
    The agent holds every GET answer back 1.5 s (its test-only fault seam)."""

    @classmethod
    def setUpClass(cls):
        cls.agent = Agent("64M", ["--test-fault", "get_delay_ms=1500"])

    @classmethod
    def tearDownClass(cls):
        assert cls.agent.stop() == 0

    def setUp(self):
        # the client's deadline (read at connect): 300 ms, + 1 s grace < the 1.5 s hold
        os.environ["MC_OP_TIMEOUT_MS"] = "300"
        try:
            self.s = mcstore.Store(self.agent.sock)
        finally:
            del os.environ["MC_OP_TIMEOUT_MS"]
        self.s.put("obj", b"\x11" * MiB, exists_ok=True)

    def tearDown(self):
        self.s.close()

    def assert_untouched_after(self, fut, buf):
        snap = bytes(buf)
        time.sleep(2.0)  # past the held answer: nothing may land now
        self.assertEqual(bytes(buf), snap)

    def test_cancel(self):
        buf = self.s.alloc_buffer(MiB)
        buf[:] = b"\xaa" * MiB
        fut = self.s.get_into_async("obj", buf, MiB)
        with self.assertRaises(mcstore.Busy):
            self.s.free_buffer(buf)  # the op owns it
        self.assertFalse(fut.cancel())  # a request: the future ends when the op is final
        with self.assertRaises((mcstore.Canceled, mcstore.Timeout)):
            fut.result(10)
        self.assert_untouched_after(fut, buf)
        poll_until(lambda: self._freed(buf), 5)

    def test_timeout(self):
        buf = bytearray(b"\xaa" * MiB)
        fut = self.s.get_into_async("obj", buf, MiB)
        with self.assertRaises(mcstore.Timeout):
            fut.result(10)
        self.assertEqual(bytes(buf), b"\xaa" * MiB)
        self.assert_untouched_after(fut, buf)

    def test_sync_timeout(self):
        buf = bytearray(MiB)
        with self.assertRaises(mcstore.Timeout):
            self.s.get_into("obj", buf, MiB)

    def _freed(self, buf):
        try:
            self.s.free_buffer(buf)
            return True
        except mcstore.Busy:
            return False


if __name__ == "__main__":
    unittest.main()

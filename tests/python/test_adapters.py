"""Conformance of the engine adapters against a real standalone mc-agent: each test replays
the call order its engine makes (lookup, pin, load, unpin, store, events), in a pool small
enough (16 MiB, 1 MiB objects) that the pins are seen holding against eviction."""

import asyncio
import ctypes
import os
import time
import unittest

import mcstore
from mcenv import Agent
from mcstore.lmcache import McStoreConnector, McStoreConnectorAdapter
from mcstore.sglang import STORAGE_BATCH_SIZE, McStoreHiCache
from mcstore.vllm import McStoreOffloadingManager

MiB = 1 << 20


class HostPool:
    """An SGLang host KV pool's shape: engine-owned memory, page_size tokens a page, and
    get_page_buffer_meta(host_indices) -> (ptrs, sizes): K and V of each page (MHA), or one
    buffer (MLA), page by page."""

    def __init__(self, pages, page_bytes, page_size=4, mla=False):
        self.page_size = page_size
        self.page_bytes = page_bytes
        self.per = 1 if mla else 2
        self.mem = (ctypes.c_char * (pages * self.per * page_bytes))()
        self.base = ctypes.addressof(self.mem)
        self.calls = 0

    def get_page_buffer_meta(self, indices):
        self.calls += 1
        ptrs, sizes = [], []
        for i in range(0, len(indices), self.page_size):
            page = indices[i] // self.page_size
            for j in range(self.per):
                ptrs.append(self.base + (page * self.per + j) * self.page_bytes)
                sizes.append(self.page_bytes)
        return ptrs, sizes

    def indices(self, pages):
        return [p * self.page_size + t for p in pages for t in range(self.page_size)]

    def page(self, p):
        n = self.per * self.page_bytes
        return bytes(self.mem[p * n:(p + 1) * n])

    def fill(self, p, seed):
        n = self.per * self.page_bytes
        self.mem[p * n:(p + 1) * n] = bytes([seed % 251]) * n

    def clear(self, p):
        self.fill(p, 0)


class Config:
    """HiCacheStorageConfig's fields the backend reads."""

    def __init__(self, tp_rank=0, model_name="m", mla=False):
        self.tp_rank = tp_rank
        self.tp_size = 2
        self.model_name = model_name
        self.is_mla_model = mla
        self.extra_config = {}


class AdapterTest(unittest.TestCase):
    def setUp(self):
        self.agent = Agent("16M")
        self.churner = mcstore.Store(self.agent.sock)
        self.blob = os.urandom(MiB)
        self.n = 0

    def tearDown(self):
        self.churner.close()
        self.assertEqual(self.agent.stop(), 0)

    def churn(self, n=40):
        """More than the pool holds: every unpinned object goes."""
        for _ in range(n):
            self.churner.put(f"churn/{self.n}", self.blob)
            self.n += 1


class SGLangTest(AdapterTest):
    def test_hicache_call_order(self):
        pool = HostPool(pages=8, page_bytes=256 * 1024)  # an MHA page: 2 x 256 KiB
        be = McStoreHiCache(Config(tp_rank=1), socket=self.agent.sock, namespace="sg/")
        be.register_mem_pool_host(pool)
        keys = [f"h{i}" for i in range(4)]
        for p in range(4):
            pool.fill(p, 10 + p)
        # backup after prefill: set, then set again (already stored counts as set)
        self.assertEqual(be.batch_set_v1(keys, pool.indices(range(4))), [True] * 4)
        self.assertEqual(be.batch_set_v1(keys, pool.indices(range(4))), [True] * 4)
        self.assertEqual(be.store.is_exist("sg/m/h0_1_k"), 1)
        self.assertEqual(be.store.is_exist("sg/m/h0_1_v"), 1)
        # prefetch: the leading pages present; a page with a buffer missing ends the run
        be.store.remove("sg/m/h3_1_v")
        self.assertEqual(be.batch_exists(keys + ["absent"]), 3)
        self.assertEqual(be.pinned_pages(), 3)
        self.churn()
        self.assertEqual(be.store.prefix_match(["sg/m/h0_1_k", "sg/m/h2_1_v"]), 2)
        # load into other pages of the pool
        for p in range(4, 7):
            pool.clear(p)
        self.assertEqual(be.batch_get_v1(keys[:3], pool.indices(range(4, 7))), [True] * 3)
        for p in range(3):
            self.assertEqual(pool.page(4 + p), pool.page(p))
        self.assertEqual(be.pinned_pages(), 0)  # loaded: unpinned
        self.churn()
        self.assertEqual(be.batch_exists(keys), 0)  # evictable again, and evicted
        self.assertEqual(be.batch_get_v1(keys[:1], pool.indices([4])), [False])
        be.close()

    def test_hicache_mla_and_batch_size(self):
        pool = HostPool(pages=STORAGE_BATCH_SIZE, page_bytes=1024, mla=True)
        be = McStoreHiCache({"model_name": "mla", "is_mla_model": True, "tp_rank": 3},
                            socket=self.agent.sock)
        be.register_mem_pool_host(pool)
        keys = [f"p{i}" for i in range(STORAGE_BATCH_SIZE)]
        for p in range(STORAGE_BATCH_SIZE):
            pool.fill(p, p)
        self.assertEqual(be.batch_set_v1(keys, pool.indices(range(STORAGE_BATCH_SIZE))),
                         [True] * STORAGE_BATCH_SIZE)
        self.assertEqual(be.store.is_exist("mla/p5_k"), 1)  # MLA: TP ranks share one object
        self.assertEqual(be.batch_exists(keys), STORAGE_BATCH_SIZE)
        out = [False] * STORAGE_BATCH_SIZE
        for p in range(STORAGE_BATCH_SIZE):
            pool.clear(p)
        out = be.batch_get_v1(keys, pool.indices(range(STORAGE_BATCH_SIZE)))
        self.assertEqual(out, [True] * STORAGE_BATCH_SIZE)
        self.assertEqual(pool.page(77), bytes([77]) * 1024)
        be.close()

    def test_hicache_reads_socket_and_namespace_from_extra_config(self):
        pool = HostPool(pages=1, page_bytes=64)
        be = McStoreHiCache({"model_name": "x", "tp_rank": 0,
                             "extra_config": {"socket": self.agent.sock, "namespace": "ec/"}})
        be.register_mem_pool_host(pool)
        self.assertEqual(be.batch_set_v1(["a"], pool.indices([0])), [True])
        self.assertEqual(self.churner.is_exist("ec/x/a_0_k"), 1)
        be.close()

    def test_hicache_as_sglang_loads_it(self):
        # StorageBackendFactory's dynamic branch: backend_class(storage_config, kwargs)
        cfg = Config(model_name="dyn")
        cfg.extra_config = {"backend_name": "mcstore", "module_path": "mcstore.sglang",
                            "class_name": "McStoreHiCache", "interface_v1": 1,
                            "socket": self.agent.sock}
        be = McStoreHiCache(cfg, {})
        pool = HostPool(pages=2, page_bytes=128)
        be.register_mem_pool_host(pool)
        self.assertEqual(be.batch_set_v1(["a"], pool.indices([0])), [True])
        self.assertTrue(be.exists("a"))
        self.assertFalse(be.exists("b"))
        with self.assertRaises(NotImplementedError):
            be.get("a")
        self.assertEqual(be.clear(), 2)  # K and V of page a
        self.assertFalse(be.exists("a"))
        be.close()

    def test_hicache_raises_rather_than_none(self):
        be = McStoreHiCache(None, socket=self.agent.sock)
        with self.assertRaises(mcstore.Error):
            be.batch_get_v1(["k"], [0])  # no pool registered
        be.register_mem_pool_host(HostPool(pages=1, page_bytes=64))
        be.store.close()
        with self.assertRaises(mcstore.Error):
            be.batch_exists(["k"])
        with self.assertRaises(mcstore.Error):
            be.batch_set_v1(["k"], list(range(4)))


class VLLMTest(AdapterTest):
    def test_offloading_manager_call_order(self):
        m = McStoreOffloadingManager(16, socket=self.agent.sock, namespace="vl/")
        hashes = [bytes([i]) * 32 for i in range(4)] + [12345, -7]
        blk = 256 * 1024
        src = m.store.alloc_buffer(blk)
        src[:] = self.blob[:blk]
        # nothing stored: lookup is 0, and stays so (no side effect)
        self.assertEqual(m.lookup(hashes), 0)
        self.assertEqual(m.lookup(hashes), 0)
        # store: prepare, move the bytes, complete, events
        out = m.prepare_store(hashes)
        self.assertEqual(out.block_hashes_to_store, hashes)
        self.assertEqual(out.block_hashes_evicted, [])
        self.assertEqual(out.store_spec.medium(), "MCSTORE")
        # a second prepare while the first is under way stores nothing twice
        self.assertEqual(m.prepare_store(hashes).block_hashes_to_store, [])
        res = m.store.batch_put_from(out.store_spec.keys, [src] * 6, [blk] * 6,
                                     exists_ok=True)
        self.assertEqual(res, [0] * 6)
        m.complete_store(hashes)
        ev = list(m.take_events())
        self.assertEqual(len(ev), 1)
        self.assertEqual((ev[0].block_hashes, ev[0].block_size, ev[0].medium, ev[0].removed),
                         (hashes, 16, "MCSTORE", False))
        self.assertEqual(list(m.take_events()), [])
        # load: lookup, prepare_load pins, the worker reads, complete_load unpins
        self.assertEqual(m.lookup(hashes), 6)
        spec = m.prepare_load(hashes[:3])
        self.churn()
        self.assertEqual(m.lookup(hashes[:3]), 3)  # pinned: survived the churn
        m.touch(hashes[:3])
        dst = [bytearray(blk) for _ in range(3)]
        self.assertEqual(m.store.batch_get_into(spec.keys, dst, [blk] * 3), [blk] * 3)
        self.assertTrue(all(bytes(d) == self.blob[:blk] for d in dst))
        m.complete_load(hashes[:3])
        self.churn()
        self.assertEqual(m.lookup(hashes), 0)
        # evictions seen at the next prepare_store, and reported as events
        out = m.prepare_store(hashes[:2])
        self.assertEqual(out.block_hashes_evicted, hashes[:2])
        ev = list(m.take_events())
        self.assertEqual([(e.block_hashes, e.removed) for e in ev], [(hashes[:2], True)])
        m.complete_store(hashes[:2], success=False)  # nothing written: no event
        self.assertEqual(list(m.take_events()), [])
        with self.assertRaises(mcstore.NotFound):
            m.prepare_load(hashes[:1])
        m.close()

    def test_lookup_none_when_unreachable(self):
        m = McStoreOffloadingManager(16, socket=self.agent.sock)
        self.agent.d.stop()
        self.assertEqual(poll_none(m, [b"x"]), True)
        m.close()


def poll_none(m, hashes):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if m.lookup(hashes) is None:
            return True
        time.sleep(0.05)
    return False


class LMCacheTest(AdapterTest):
    def test_remote_connector_call_order(self):
        async def main():
            c = McStoreConnector(socket=self.agent.sock, namespace="lm/")
            keys = [f"chunk{i}" for i in range(4)]
            self.assertFalse(await c.exists(keys[0]))
            self.assertIsNone(await c.get(keys[0]))
            for k in keys:
                await c.put(k, self.blob)
            await c.put(keys[0], self.blob)  # write-once: stays
            self.assertTrue(await c.exists(keys[0]))
            self.assertTrue(c.exists_sync(keys[1]))
            self.assertEqual(sorted(await c.list()), sorted(keys))
            # lookup and lock, retrieve, unlock
            n = await c.batched_async_contains("req1", keys + ["missing"], pin=True)
            self.assertEqual(n, 4)
            self.assertEqual(await c.batched_async_contains("req2", keys), 4)
            self.churn()
            self.assertEqual(await c.get(keys[3]), self.blob)
            self.assertEqual(c.batched_unpin("req1"), 4)
            self.assertEqual(c.batched_unpin("req1"), 0)
            self.churn()
            self.assertEqual(await c.batched_async_contains("req3", keys), 0)
            await c.close()

        asyncio.run(main())

    def test_plugin_adapter_builds_the_connector(self):
        class Context:  # LMCache's ConnectorContext: the adapter reads its url
            url = f"mcstore://{self.agent.sock}?namespace=plug/"

        ad = McStoreConnectorAdapter("ignored", k=1)
        self.assertTrue(ad.can_parse(Context.url))
        self.assertFalse(ad.can_parse("redis://x"))
        self.assertEqual(ad.parse_url("mcstore://"), (None, ""))
        self.assertEqual(ad.parse_url("mcstore:///run/mc/a.sock?namespace=n/"),
                         ("/run/mc/a.sock", "n/"))
        with self.assertRaises(ValueError):
            ad.parse_url("redis://x")

        async def main():
            c = ad.create_connector(Context())
            await c.put("k", b"v")
            await c.close()

        asyncio.run(main())
        self.assertEqual(self.churner.get("plug/k"), b"v")

    def test_connector_pins_end_with_close(self):
        async def main():
            c = McStoreConnector(socket=self.agent.sock)
            for i in range(4):
                await c.put(f"k{i}", self.blob)
            self.assertEqual(await c.batched_async_contains(
                1, [f"k{i}" for i in range(4)], pin=True), 4)
            await c.close()

        asyncio.run(main())
        self.churn()
        self.assertEqual(self.churner.prefix_match([f"k{i}" for i in range(4)]), 0)


if __name__ == "__main__":
    unittest.main()

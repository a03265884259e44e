"""SGLang HiCache storage backend over mcstore (no SGLang import needed).

SGLang's HiCacheStorage v1 calls, with the shapes of its host memory pools:

    backend = McStoreHiCache(storage_config)        # HiCacheStorageConfig, a dict, or None
    backend.register_mem_pool_host(pool)            # pool.get_page_buffer_meta(indices)
    backend.batch_exists(keys) -> int               # leading pages present (prefetch)
    backend.batch_get_v1(keys, host_indices) -> list[bool]
    backend.batch_set_v1(keys, host_indices) -> list[bool]

`pool.get_page_buffer_meta(host_indices)` returns (ptrs, sizes): every buffer of every page,
page by page (an MHA page gives two, K then V; an MLA page one). Each buffer is one object;
a page is present only when all its buffers are. Keys are namespaced as SGLang's Mooncake
backend does: `{namespace}{model_name}/{page_key}_{tp_rank}_{k|v}` for MHA pages (each TP
rank stores its own heads), `{namespace}{model_name}/{page_key}_k` for MLA (ranks share).

`socket` and `namespace` may also come from storage_config.extra_config (SGLang's
--hicache-storage-backend-extra-config JSON).

A page that batch_exists() counted is pinned until batch_get_v1() has loaded it (SGLang's
prefetch window: counted pages are not evicted before they are read); pins left behind by a
prefetch that was given up end after `pin_max_age_s` or at the store's pin_ttl_ms. A page
already stored counts as set (write-once). Failures of the store raise mcstore.Error (SGLang's
worker threads die on a None); a page that could not be read or written is False.
"""

import threading
import time

from . import _lib
from .errors import error_for
from .store import Store

STORAGE_BATCH_SIZE = 128  # pages per call, as SGLang sends them

try:  # SGLang's loader wants its base class; without SGLang (tests, tools) none is needed
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage as _Base
except Exception:  # noqa: BLE001 - any failure to import SGLang means "not there"
    _Base = object


def _cfg(storage_config, name, default=None):
    if storage_config is None:
        return default
    if isinstance(storage_config, dict):
        return storage_config.get(name, default)
    return getattr(storage_config, name, default)


class McStoreHiCache(_Base):
    """An SGLang HiCache v1 storage backend. SGLang's dynamic loader calls it as
    McStoreHiCache(storage_config, kwargs)."""

    def __init__(self, storage_config=None, kwargs=None, *, socket=None, namespace="",
                 pin_max_age_s=30.0):
        extra = _cfg(storage_config, "extra_config", None) or {}
        # SGLang's --hicache-storage-backend-extra-config may name them too
        socket = socket if socket is not None else extra.get("socket")
        namespace = namespace or extra.get("namespace", "")
        self.store = Store(socket)
        model = _cfg(storage_config, "model_name", None) or extra.get("model_name", "")
        self.tp_rank = int(_cfg(storage_config, "tp_rank", 0) or 0)
        self.is_mla = bool(_cfg(storage_config, "is_mla_model", False))
        self.prefix = namespace + (f"{model}/" if model else "")
        self.pool = None
        self.pin_max_age_s = pin_max_age_s
        self._lock = threading.Lock()
        self._pinned = {}  # page key -> [Pin, pages of it not loaded yet, taken at]

    # --- keys ----------------------------------------------------------------------------

    def _suffixes(self, per_page):
        if per_page == 1:
            return ["_k"] if self.is_mla else [f"_{self.tp_rank}_k"]
        if per_page == 2:
            return [f"_{self.tp_rank}_k", f"_{self.tp_rank}_v"]
        return [f"_{self.tp_rank}_{j}" for j in range(per_page)]

    def _object_keys(self, keys, per_page):
        sfx = self._suffixes(per_page)
        return [f"{self.prefix}{k}{s}" for k in keys for s in sfx]

    def _per_page(self):
        # one buffer per page for MLA, K and V for MHA, unless the pool says otherwise
        return getattr(self.pool, "buffers_per_page", 1 if self.is_mla else 2)

    def _meta(self, keys, host_indices):
        if self.pool is None:
            raise error_for(_lib.ERR_INVALID, "register_mem_pool_host() first")
        ptrs, sizes = self.pool.get_page_buffer_meta(host_indices)
        if len(keys) == 0 or len(ptrs) % len(keys) != 0 or len(ptrs) != len(sizes):
            raise error_for(_lib.ERR_INVALID,
                        f"{len(ptrs)} buffers for {len(keys)} pages from get_page_buffer_meta")
        return list(ptrs), list(sizes), len(ptrs) // len(keys)

    # --- HiCacheStorage v1 --------------------------------------------------------------

    def register_mem_pool_host(self, pool):
        self.pool = pool

    def batch_exists(self, keys, extra_info=None):
        """How many leading pages are present (all their buffers); they stay pinned until
        batch_get_v1() loads them."""
        if not keys:
            return 0
        per = self._per_page()
        okeys = self._object_keys(keys, per)
        self._expire_pins()
        n, pin = self.store.prefix_pin(okeys)
        pages = n // per
        if pages == 0:
            pin.release()
            return 0
        with self._lock:
            entry = [pin, pages, time.monotonic()]
            for k in keys[:pages]:
                old = self._pinned.get(k)
                self._pinned[k] = entry
                if old is not None:
                    self._drop_locked(old)
        return pages

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        """Load pages into the host pool at host_indices: one bool per page."""
        if not keys:
            return []
        ptrs, sizes, per = self._meta(keys, host_indices)
        okeys = self._object_keys(keys, per)
        res = self.store.batch_get_into(okeys, ptrs, sizes)
        out = [all(res[i * per + j] == sizes[i * per + j] for j in range(per))
               for i in range(len(keys))]
        self._loaded(keys)
        return out

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        """Store pages from the host pool at host_indices: one bool per page (a page stored
        already counts as set)."""
        if not keys:
            return []
        ptrs, sizes, per = self._meta(keys, host_indices)
        okeys = self._object_keys(keys, per)
        res = self.store.batch_put_from(okeys, ptrs, sizes, exists_ok=True)
        return [all(res[i * per + j] >= 0 for j in range(per)) for i in range(len(keys))]

    # --- HiCacheStorage's older calls --------------------------------------------------------

    def exists(self, key):
        """Whether the page is stored (all of its buffers)."""
        per = self._per_page()
        okeys = self._object_keys([key], per)
        return self.store.prefix_match(okeys) == per

    def get(self, key, target_location=None, target_sizes=None):
        raise NotImplementedError("McStoreHiCache serves the v1 calls: set interface_v1=1")

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        raise NotImplementedError("McStoreHiCache serves the v1 calls: set interface_v1=1")

    def set(self, key, value=None, target_location=None, target_sizes=None):
        raise NotImplementedError("McStoreHiCache serves the v1 calls: set interface_v1=1")

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        raise NotImplementedError("McStoreHiCache serves the v1 calls: set interface_v1=1")

    def clear(self):
        """Remove every page under this backend's prefix (namespace and model)."""
        if not self.prefix:
            raise error_for(_lib.ERR_INVALID, "clear() needs a namespace or a model name")
        return self.store.remove_prefix(self.prefix)

    def close(self):
        with self._lock:
            entries = {id(e): e for e in self._pinned.values()}
            self._pinned.clear()
        for e in entries.values():
            e[0].release()
        self.store.close()

    # --- the prefetch window's pins -------------------------------------------------------

    def _drop_locked(self, entry):
        entry[1] -= 1
        if entry[1] == 0:
            entry[0].release()

    def _loaded(self, keys):
        with self._lock:
            for k in keys:
                e = self._pinned.pop(k, None)
                if e is not None:
                    self._drop_locked(e)

    def _expire_pins(self):
        now = time.monotonic()
        with self._lock:
            stale = [k for k, e in self._pinned.items() if now - e[2] > self.pin_max_age_s]
            for k in stale:
                self._drop_locked(self._pinned.pop(k))

    def pinned_pages(self):
        """Pages counted by batch_exists() and not loaded yet (held against eviction)."""
        with self._lock:
            return len(self._pinned)

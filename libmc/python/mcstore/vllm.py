"""vLLM offloading manager over mcstore (the OffloadingManager shape; no vLLM import needed).

    m = McStoreOffloadingManager(block_size)
    m.lookup(block_hashes) -> int | None      # leading blocks present; no side effect
    m.prepare_load(block_hashes) -> McStoreLoadSpec   # pins them
    m.touch(block_hashes)
    m.complete_load(block_hashes)             # unpins
    m.prepare_store(block_hashes) -> PrepareStoreOutput | None
    m.complete_store(block_hashes, success=True)
    m.take_events() -> iterable of OffloadingEvent(block_hashes, block_size, medium, removed)

Block hashes are bytes or int; each block is one object, `{namespace}{hash as hex}`. The
bytes move with put_from/get_into (or their batch and async forms) of the same Store,
`manager.store`, with the keys the specs carry. lookup() answers None ("ask again") when
the store cannot be reached right now, as vLLM allows.
"""

import collections
import threading

from . import _lib
from .errors import Error, error_for
from .store import Store

MEDIUM = "MCSTORE"

OffloadingEvent = collections.namedtuple("OffloadingEvent",
                                         ["block_hashes", "block_size", "medium", "removed"])
PrepareStoreOutput = collections.namedtuple(
    "PrepareStoreOutput", ["block_hashes_to_store", "store_spec", "block_hashes_evicted"])


class McStoreLoadSpec:
    """Where prepare_load()'s blocks are: their keys in manager.store (all pinned)."""

    def __init__(self, keys):
        self.keys = keys

    @staticmethod
    def medium():
        return MEDIUM


class McStoreStoreSpec:
    """Where prepare_store()'s blocks go: their keys in manager.store."""

    def __init__(self, keys):
        self.keys = keys

    @staticmethod
    def medium():
        return MEDIUM


_RETRY = (_lib.ERR_UNAVAILABLE, _lib.ERR_TIMEOUT)


class McStoreOffloadingManager:
    """vLLM's OffloadingManager (scheduler side) backed by mcstore."""

    def __init__(self, block_size, *, socket=None, namespace=""):
        self.block_size = block_size
        self.namespace = namespace
        self.store = Store(socket)
        self._lock = threading.Lock()
        self._pins = {}      # block hash -> list of [Pin, blocks of it not completed]
        self._storing = set()
        self._stored = set()  # blocks this manager stored and has not seen go
        self._events = []

    def key(self, block_hash):
        """The object key of a block."""
        if isinstance(block_hash, (bytes, bytearray)):
            return self.namespace + bytes(block_hash).hex()
        if isinstance(block_hash, int):
            return self.namespace + "i" + format(block_hash, "x")
        raise TypeError("a block hash is bytes or int")

    def keys(self, block_hashes):
        return [self.key(h) for h in block_hashes]

    # --- loads ----------------------------------------------------------------------------

    def lookup(self, block_hashes):
        """How many leading blocks are stored; None: ask again later. No side effect."""
        try:
            return self.store.prefix_match(self.keys(block_hashes))
        except Error as e:
            if e.code in _RETRY:
                return None
            raise

    def prepare_load(self, block_hashes):
        """Pin the blocks until complete_load(); raises NotFound if one of them is gone."""
        block_hashes = list(block_hashes)
        keys = self.keys(block_hashes)
        n, pin = self.store.prefix_pin(keys)
        if n < len(keys):
            pin.release()
            raise error_for(_lib.ERR_NOT_FOUND, f"block {n} of {len(keys)} is not stored")
        entry = [pin, len(block_hashes)]
        with self._lock:
            for h in block_hashes:
                self._pins.setdefault(self._hkey(h), []).append(entry)
        return McStoreLoadSpec(keys)

    def complete_load(self, block_hashes):
        """The load of these blocks is over: unpin them."""
        with self._lock:
            for h in block_hashes:
                lst = self._pins.get(self._hkey(h))
                if not lst:
                    continue
                entry = lst.pop(0)
                if not lst:
                    del self._pins[self._hkey(h)]
                entry[1] -= 1
                if entry[1] == 0:
                    entry[0].release()

    def touch(self, block_hashes):
        """Mark the blocks recently used (also blocks vLLM still holds on the GPU)."""
        keys = self.keys(block_hashes)
        if keys:
            self.store.touch(keys)

    # --- stores ---------------------------------------------------------------------------

    def prepare_store(self, block_hashes):
        """Which of the blocks to store (those not stored nor being stored) and which blocks
        this manager stored were evicted since; None when the store cannot be reached."""
        block_hashes = list(block_hashes)
        try:
            present = self.store.batch_is_exist(self.keys(block_hashes))
        except Error as e:
            if e.code in _RETRY:
                return None
            raise
        to_store, evicted = [], []
        with self._lock:
            for h, p in zip(block_hashes, present):
                hk = self._hkey(h)
                if p == 1 or hk in self._storing:
                    continue
                if hk in self._stored:
                    self._stored.discard(hk)
                    evicted.append(h)
                self._storing.add(hk)
                to_store.append(h)
            if evicted:
                self._events.append(OffloadingEvent(evicted, self.block_size, MEDIUM, True))
        return PrepareStoreOutput(to_store, McStoreStoreSpec(self.keys(to_store)), evicted)

    def complete_store(self, block_hashes, success=True):
        """The blocks from prepare_store() were written (success) or not."""
        block_hashes = list(block_hashes)
        done = []
        with self._lock:
            for h in block_hashes:
                hk = self._hkey(h)
                if hk not in self._storing:
                    continue
                self._storing.discard(hk)
                if success:
                    self._stored.add(hk)
                    done.append(h)
            if done:
                self._events.append(OffloadingEvent(done, self.block_size, MEDIUM, False))

    def take_events(self):
        """The events since the last call: blocks stored (removed=False) and blocks found
        evicted (removed=True)."""
        with self._lock:
            ev, self._events = self._events, []
        return iter(ev)

    def close(self):
        with self._lock:
            entries = {id(e): e for lst in self._pins.values() for e in lst}
            self._pins.clear()
        for e in entries.values():
            e[0].release()
        self.store.close()

    @staticmethod
    def _hkey(h):
        return bytes(h) if isinstance(h, bytearray) else h

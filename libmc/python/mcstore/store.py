"""Store: a connection to the node's mc-agent, the Python face of <mc/mc.h>.

Names follow Mooncake's MooncakeDistributedStore, so a connector written for it ports by
changing its import. Single calls raise an mcstore.Error subclass on failure; batch calls
return one status per item instead (0 or more: success, a negative MC_ERR_* code: that
item's failure). A Store may be shared by threads (libmc is thread-safe and every call
releases the GIL); close() must be the last call.

Buffers. `ptr` arguments take an address (int) or any object with the buffer protocol
(bytes for what is only read, a writable buffer for what is written). Any memory works;
memory from alloc_buffer() is the agent's shared arena and needs no copy on the node. A
buffer handed to an async op belongs to the op until its future is done: it is never written
after that, and the Store keeps a reference to it meanwhile.
"""

import asyncio
import concurrent.futures
import ctypes
import json
import os
import select
import threading

from . import _lib
from ._lib import lib
from .errors import check, error_for

_KEY_MAX = _lib.KEY_MAX
_STATS_CAP = 1 << 16
_GET_FIRST_CAP = 1 << 16


def _key(k):
    """A key as bytes for libmc; b"" (invalid for libmc) for keys it cannot take."""
    t = type(k)
    if t is str:
        k = k.encode()
    elif t is not bytes:
        if not isinstance(k, (bytes, bytearray, str)):
            raise TypeError(f"a key is str or bytes, not {t.__name__}")
        k = k.encode() if isinstance(k, str) else bytes(k)
    # a NUL would cut the key short in C: refuse it rather than name another key
    if 0 < len(k) <= _KEY_MAX and b"\0" not in k:
        return k
    return b""


def _key_checked(k):
    b = _key(k)
    if not b:
        raise error_for(_lib.ERR_INVALID, f"key {k!r}")
    return b


def _keys_array(keys):
    return (ctypes.c_char_p * max(len(keys), 1))(*map(_key, keys))


def _address(obj, size, writable):
    """(address, keepalive) of `size` bytes at obj: an int address, or a buffer object."""
    if isinstance(obj, int):
        if obj <= 0:
            raise error_for(_lib.ERR_INVALID, "null pointer")
        return obj, None
    mv = memoryview(obj)
    if mv.nbytes < size:
        raise error_for(_lib.ERR_INVALID, f"buffer of {mv.nbytes} bytes for {size}")
    if mv.readonly:
        if writable:
            raise error_for(_lib.ERR_INVALID, "a read-only buffer cannot receive data")
        if not mv.c_contiguous:
            raise error_for(_lib.ERR_INVALID, "buffer not contiguous")
        b = mv.obj if isinstance(mv.obj, bytes) and mv.nbytes == len(mv.obj) else bytes(mv)
        return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value, b
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B") if mv.format != "B" else mv)
    return ctypes.addressof(arr), (arr, mv)


def address_of(buf):
    """The address of a writable buffer (e.g. one from Store.alloc_buffer()), for `ptr`."""
    return _address(buf, 0, True)[0]


def _opts(replicas=1, upsert=False, ttl_ms=0, pin=None, exists_ok=False):
    o = _lib.PutOpts()
    o.replicas = int(replicas)
    flags = 0
    if upsert:
        flags |= _lib.PUT_UPSERT
    if exists_ok:
        flags |= _lib.PUT_EXISTS_OK
    if pin == "soft":
        flags |= _lib.PUT_PIN_SOFT
    elif pin == "hard":
        flags |= _lib.PUT_PIN_HARD
    elif pin is not None:
        raise ValueError("pin is None, 'soft' or 'hard'")
    o.flags = flags
    o.ttl_ms = int(ttl_ms)
    return o


class Pin:
    """The pin of Store.prefix_pin(): its objects are not evicted until release() (or the
    Store's close, or pin_ttl_ms). A context manager; release() is idempotent."""

    def __init__(self, store, pin_id, count):
        self._store = store
        self.id = pin_id
        self.count = count
        self._released = False

    def release(self):
        """End the pin; returns how many objects it still held (0 once released)."""
        if self._released:
            return 0
        self._released = True
        if self._store._c is None:
            return 0  # the connection ended: so did the pin
        return check(lib.mc_unpin(self._store._c, self.id), "unpin")

    @property
    def released(self):
        return self._released

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


class OpFuture(concurrent.futures.Future):
    """The future of an async op: usable from threads (result(timeout)) and awaitable from
    asyncio. Its result is the op's: bytes read for get_into_async, 0 or mcstore.PRESENT for
    put_from_async; a failure is its mcstore.Error. cancel() asks the op to stop and returns
    False: the future is done only when the op is final (its buffer free again), with
    mcstore.Canceled unless it finished first."""

    def __init__(self, store, op, keep, is_get):
        super().__init__()
        self._store = store
        self._op = op
        self._keep = keep
        self._is_get = is_get

    def cancel(self):
        with self._store._lock:
            if self._op is not None:
                lib.mc_cancel(self._op)
        return False

    def __await__(self):
        return asyncio.wrap_future(self).__await__()


class _Reaper(threading.Thread):
    """Completes async ops: sleeps on the client eventfd, reaps, settles futures."""

    def __init__(self, store):
        super().__init__(name="mcstore-reaper", daemon=True)
        self._store = store
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe()

    def stop(self):
        self._stopping = True
        os.write(self._wake_w, b"x")
        self.join()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def run(self):
        s = self._store
        efd = lib.mc_client_eventfd(s._c)
        p = select.poll()
        p.register(self._wake_r, select.POLLIN)
        if efd >= 0:
            p.register(efd, select.POLLIN)
        # a silent agent's ops end at their deadline only when someone reaps: wake now and then
        tick = 100 if efd >= 0 else 1
        while not self._stopping:
            p.poll(tick)
            if self._stopping:
                break
            lib.mc_client_poll(s._c)
            s._settle(0)


class Store:
    """A connection to the local mc-agent (socket=None: libmc's default socket)."""

    def __init__(self, socket=None):
        c = ctypes.c_void_p()
        path = None if socket is None else os.fsencode(socket)
        check(lib.mc_connect(path, ctypes.byref(c)), "connect")
        self._c = c
        self._lock = threading.Lock()
        self._pending = []
        self._reaper = None
        self._bufs = {}
        self._registered = {}

    # --- lifetime -----------------------------------------------------------------------

    def close(self):
        """Close the connection: async ops are canceled and waited for (their futures end),
        pins end, arena buffers are unmapped (memoryviews from alloc_buffer() must not be
        used afterwards). Idempotent."""
        if self._c is None:
            return
        if self._reaper is not None:
            self._reaper.stop()
            self._reaper = None
        with self._lock:
            for f in self._pending:
                lib.mc_cancel(f._op)
        self._settle(-1)
        lib.mc_close(self._c)
        self._c = None
        self._bufs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _client(self):
        if self._c is None:
            raise error_for(_lib.ERR_INVALID, "the store is closed")
        return self._c

    # --- objects --------------------------------------------------------------------------

    def put(self, key, value, replicas=1, upsert=False, ttl_ms=0, pin=None, exists_ok=False):
        """Store `value` (bytes-like) under `key`. Returns 0, or mcstore.PRESENT when
        exists_ok and the key was stored already. pin: None, "soft" or "hard"."""
        ptr, keep = _address(value, 0, False)
        size = memoryview(value).nbytes
        o = _opts(replicas, upsert, ttl_ms, pin, exists_ok)
        rc = lib.mc_put(self._client(), _key_checked(key), ptr, size, ctypes.byref(o))
        del keep
        return check(rc, "put")

    def put_from(self, key, ptr, size, replicas=1, upsert=False, ttl_ms=0, pin=None,
                 exists_ok=False):
        """Store `size` bytes at `ptr` under `key` (zero-copy from alloc_buffer() memory).
        Returns 0, or mcstore.PRESENT (exists_ok)."""
        addr, keep = _address(ptr, size, False)
        o = _opts(replicas, upsert, ttl_ms, pin, exists_ok)
        rc = lib.mc_put(self._client(), _key_checked(key), addr, size, ctypes.byref(o))
        del keep
        return check(rc, "put_from")

    def get(self, key):
        """The object's bytes; NotFound when absent."""
        k = _key_checked(key)
        cap = _GET_FIRST_CAP
        for _ in range(8):  # the object may be replaced by a larger one between tries
            buf = ctypes.create_string_buffer(cap)
            n = ctypes.c_size_t(0)
            rc = lib.mc_get(self._client(), k, buf, cap, ctypes.byref(n))
            if rc == 0:
                return buf.raw[: n.value]
            if rc != _lib.ERR_TOO_LARGE:
                check(rc, "get")
            cap = n.value
        raise error_for(_lib.ERR_BUSY, "get: the object kept growing")

    def get_into(self, key, ptr, size):
        """Read the object into `size` bytes at `ptr`; returns the bytes read."""
        addr, keep = _address(ptr, size, True)
        n = ctypes.c_size_t(0)
        rc = lib.mc_get(self._client(), _key_checked(key), addr, size, ctypes.byref(n))
        del keep
        check(rc, "get_into")
        return n.value

    def get_size(self, key):
        """The object's size in bytes; NotFound when absent."""
        info = _lib.ObjInfo()
        check(lib.mc_stat(self._client(), _key_checked(key), ctypes.byref(info)), "get_size")
        return info.size

    def is_exist(self, key):
        """1 if the key is present, 0 if not."""
        return check(lib.mc_exist(self._client(), _key_checked(key)), "is_exist")

    def remove(self, key):
        """Remove the object; NotFound when absent."""
        check(lib.mc_remove(self._client(), _key_checked(key)), "remove")

    def remove_prefix(self, prefix):
        """Remove every object whose key starts with prefix; returns how many."""
        n = ctypes.c_uint64(0)
        check(lib.mc_remove_prefix(self._client(), _key_checked(prefix), ctypes.byref(n)),
              "remove_prefix")
        return n.value

    # --- batches: one status per item ---------------------------------------------------

    def batch_put_from(self, keys, ptrs, sizes, replicas=1, upsert=False, ttl_ms=0, pin=None,
                       exists_ok=False):
        """Store keys[i] from sizes[i] bytes at ptrs[i]. Returns one status per item: 0
        stored, mcstore.PRESENT already there (with exists_ok), or a negative MC_ERR_* code
        (ERR_EXISTS already there, ERR_NO_SPACE, ERR_INVALID, ...)."""
        n = len(keys)
        if len(ptrs) != n or len(sizes) != n:
            raise error_for(_lib.ERR_INVALID, "keys, ptrs and sizes differ in length")
        if n == 0:
            return []
        karr = _keys_array(keys)
        parr = (ctypes.c_void_p * n)()
        sarr = (ctypes.c_size_t * n)()
        keep = []
        for i in range(n):
            parr[i], kp = _address(ptrs[i], sizes[i], False)
            sarr[i] = sizes[i]
            keep.append(kp)
        res = (ctypes.c_int * n)()
        o = _opts(replicas, upsert, ttl_ms, pin, exists_ok)
        check(lib.mc_batch_put(self._client(), n, karr, parr, sarr, ctypes.byref(o), res),
              "batch_put_from")
        return list(res)

    def batch_get_into(self, keys, ptrs, sizes):
        """Read keys[i] into sizes[i] bytes at ptrs[i]. Returns one status per item: the
        bytes read (> 0), or a negative MC_ERR_* code (ERR_NOT_FOUND, ERR_TOO_LARGE, ...)."""
        n = len(keys)
        if len(ptrs) != n or len(sizes) != n:
            raise error_for(_lib.ERR_INVALID, "keys, ptrs and sizes differ in length")
        if n == 0:
            return []
        karr = _keys_array(keys)
        carr = (ctypes.c_size_t * n)(*sizes)
        keep = []
        if all(type(p) is int and p > 0 for p in ptrs):
            parr = (ctypes.c_void_p * n)(*ptrs)  # the engine's case: addresses, no checks
        else:
            parr = (ctypes.c_void_p * n)()
            for i in range(n):
                parr[i], kp = _address(ptrs[i], sizes[i], True)
                keep.append(kp)
        lens = (ctypes.c_size_t * n)()
        res = (ctypes.c_int * n)()
        check(lib.mc_batch_get(self._client(), n, karr, parr, carr, lens, res),
              "batch_get_into")
        return [lens[i] if res[i] == 0 else res[i] for i in range(n)]

    def batch_is_exist(self, keys):
        """One answer per key: 1 present, 0 absent, or a negative MC_ERR_* code."""
        n = len(keys)
        if n == 0:
            return []
        res = (ctypes.c_int * n)()
        check(lib.mc_batch_exist(self._client(), n, _keys_array(keys), res), "batch_is_exist")
        return list(res)

    def _check_keys(self, keys):
        arr = _keys_array(keys)
        for i in range(len(keys)):
            if not arr[i]:
                raise error_for(_lib.ERR_INVALID, f"key {keys[i]!r}")
        return arr

    def prefix_match(self, keys):
        """How many leading keys are present. No side effect (no lease, no recency)."""
        if not keys:
            return 0
        return check(lib.mc_prefix_match(self._client(), len(keys), self._check_keys(keys)),
                     "prefix_match")

    def prefix_pin(self, keys):
        """Like prefix_match, and pin the counted objects: (count, Pin). The Pin ends with
        Pin.release(), this Store's close, or pin_ttl_ms."""
        pid = ctypes.c_uint64(0)
        arr = self._check_keys(keys)
        k = check(lib.mc_prefix_pin(self._client(), len(keys), arr, ctypes.byref(pid)),
                  "prefix_pin")
        return k, Pin(self, pid.value, k)

    def touch(self, keys):
        """Mark the objects recently used, without reading them; returns how many exist."""
        if not keys:
            return 0
        return check(lib.mc_touch(self._client(), len(keys), self._check_keys(keys)), "touch")

    # --- memory ----------------------------------------------------------------------------

    def alloc_buffer(self, size):
        """`size` bytes of arena memory (shared with the agent: no copy on the node) as a
        writable memoryview; address_of() gives its address for `ptr`. Valid until
        free_buffer() or close()."""
        p = ctypes.c_void_p()
        check(lib.mc_buf_alloc(self._client(), int(size), ctypes.byref(p)), "alloc_buffer")
        arr = (ctypes.c_char * int(size)).from_address(p.value)
        mv = memoryview(arr).cast("B")
        with self._lock:
            self._bufs[p.value] = arr
        return mv

    def free_buffer(self, buf):
        """Free a buffer from alloc_buffer() (the memoryview or its address); Busy while an
        op still owns it."""
        addr = buf if isinstance(buf, int) else address_of(buf)
        with self._lock:
            if addr not in self._bufs:
                raise error_for(_lib.ERR_INVALID, "not a buffer of alloc_buffer()")
        check(lib.mc_buf_free(self._client(), addr), "free_buffer")
        with self._lock:
            del self._bufs[addr]

    def register_buffer(self, ptr, size):
        """Declare memory the engine owns (Mooncake's call). mcstore needs no registration:
        the agent reads any of the caller's memory (process_vm_readv) and gets copy from
        the shared segment. The range is only recorded, so that unregister_buffer() can
        check its argument. Returns 0."""
        addr, _ = _address(ptr, size, False)
        if size <= 0:
            raise error_for(_lib.ERR_INVALID, "size")
        with self._lock:
            self._registered[addr] = size
        return 0

    def unregister_buffer(self, ptr):
        """Forget a range from register_buffer(); Invalid if it was not registered."""
        addr = ptr if isinstance(ptr, int) else address_of(ptr)
        with self._lock:
            if self._registered.pop(addr, None) is None:
                raise error_for(_lib.ERR_INVALID, "not a registered buffer")
        return 0

    # --- async --------------------------------------------------------------------------

    def _submit(self, fn, args, keep, is_get):
        op = ctypes.c_void_p()
        with self._lock:
            check(fn(*args, ctypes.byref(op)), fn.__name__)
            fut = OpFuture(self, op, keep, is_get)
            self._pending.append(fut)
            if self._reaper is None:
                self._reaper = _Reaper(self)
                self._reaper.start()
        return fut

    def _settle(self, timeout_ms):
        """Finish the pending ops that are final (waiting up to timeout_ms each; -1: until
        final). Only the reaper, or close() after it stopped, calls this."""
        with self._lock:
            pending = list(self._pending)
        n = ctypes.c_size_t(0)
        for f in pending:
            st = lib.mc_wait(f._op, timeout_ms, ctypes.byref(n))
            if st == _lib.INPROGRESS:
                continue
            with self._lock:
                self._pending.remove(f)
                op, f._op = f._op, None
            lib.mc_op_free(op)
            f._keep = None  # the buffer is the caller's again
            if st < 0:
                f.set_exception(error_for(st, "async op"))
            else:
                f.set_result(n.value if f._is_get else st)

    def get_into_async(self, key, ptr, size):
        """Submit get_into(); returns an OpFuture of the bytes read."""
        addr, keep = _address(ptr, size, True)
        fut = self._submit(lib.mc_get_async, (self._client(), _key_checked(key), addr, size),
                           (keep, ptr), True)
        return fut

    def put_from_async(self, key, ptr, size, replicas=1, upsert=False, ttl_ms=0, pin=None,
                       exists_ok=False):
        """Submit put_from(); returns an OpFuture of 0 (or PRESENT)."""
        addr, keep = _address(ptr, size, False)
        o = _opts(replicas, upsert, ttl_ms, pin, exists_ok)
        return self._submit(lib.mc_put_async,
                            (self._client(), _key_checked(key), addr, size, ctypes.byref(o)),
                            (keep, ptr, o), False)

    # --- the rest -------------------------------------------------------------------------

    def stats(self):
        """The agent's statistics (mcctl stats) as a dict."""
        cap = _STATS_CAP
        for _ in range(4):
            buf = ctypes.create_string_buffer(cap)
            n = ctypes.c_size_t(0)
            rc = lib.mc_stats(self._client(), buf, cap, ctypes.byref(n))
            if rc == 0:
                return json.loads(buf.value.decode())
            if rc != _lib.ERR_TOO_LARGE:
                check(rc, "stats")
            cap = n.value + 4096
        raise error_for(_lib.ERR_BUSY, "stats kept growing")

    def eventfd(self):
        """The client eventfd (mc_client_eventfd), for a caller's own event loop."""
        return check(lib.mc_client_eventfd(self._client()), "eventfd")

    def status(self):
        """0 while the connection is usable, else the code that poisoned it."""
        return lib.mc_client_status(self._client())


__all__ = ["Store", "Pin", "OpFuture", "address_of"]

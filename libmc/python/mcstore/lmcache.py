"""LMCache remote connector over mcstore (the RemoteConnector shape; no LMCache import).

    c = McStoreConnector()
    await c.exists(key) / c.exists_sync(key)
    await c.get(key) -> bytes | None
    await c.put(key, data)
    await c.list() -> list[str]
    await c.batched_async_contains(lookup_id, keys, pin=False) -> int
    c.batched_unpin(lookup_id)
    await c.close()

LMCache loads it as a remote storage plugin through McStoreConnectorAdapter, which
takes remote URLs `mcstore://[SOCKET_PATH][?namespace=NS]` (docs/engines.md).

Keys are str, bytes, or LMCache's CacheEngineKey (anything with to_string()), namespaced with
`namespace`. data is any bytes-like object (or one with a byte_array, as LMCache's MemoryObj).
A lookup with pin=True holds the counted objects until batched_unpin(lookup_id), close(), or
the end of the connection. Blocking libmc calls run in the default executor (ctypes drops
the GIL), the put through libmc's async op and the client eventfd.
"""

import asyncio
import ctypes
import threading
import urllib.parse

from ._lib import lib
from .errors import NotFound, check
from .store import Store

_LIST_CAP = 1 << 20


class McStoreConnector:
    """LMCache's RemoteConnector backed by mcstore."""

    def __init__(self, *, socket=None, namespace=""):
        self.namespace = namespace
        self.store = Store(socket)
        self._lock = threading.Lock()
        self._pins = {}  # lookup_id -> [Pin]

    def _key(self, key):
        if hasattr(key, "to_string"):
            key = key.to_string()
        if isinstance(key, (bytes, bytearray)):
            key = bytes(key).decode("utf-8", "surrogateescape")
        return self.namespace + key

    @staticmethod
    async def _run(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # --- required -------------------------------------------------------------------------

    def exists_sync(self, key):
        return self.store.is_exist(self._key(key)) == 1

    async def exists(self, key):
        return await self._run(self.exists_sync, key)

    async def get(self, key):
        """The object's bytes, or None when it is not stored."""
        try:
            return await self._run(self.store.get, self._key(key))
        except NotFound:
            return None

    async def put(self, key, data):
        """Store data (write-once: a key stored already is left as it is)."""
        data = getattr(data, "byte_array", data)
        mv = memoryview(data)
        await self.store.put_from_async(self._key(key), mv if not mv.readonly else bytes(mv),
                                        mv.nbytes, exists_ok=True)

    def list_sync(self):
        """Every key under the namespace (without it)."""
        out = []
        cursor = ctypes.c_uint64(0)
        buf = ctypes.create_string_buffer(_LIST_CAP)
        prefix = self.namespace.encode()
        while True:
            n = check(lib.mc_list(self.store._client(), prefix, ctypes.byref(cursor), buf,
                                  _LIST_CAP), "list")
            raw = buf.raw
            pos = 0
            for _ in range(n):
                end = raw.index(b"\0", pos)
                out.append(raw[pos + len(prefix):end].decode("utf-8", "surrogateescape"))
                pos = end + 1
            if cursor.value == 0:
                return out

    async def list(self):
        return await self._run(self.list_sync)

    async def close(self):
        with self._lock:
            pins = [p for lst in self._pins.values() for p in lst]
            self._pins.clear()
        for p in pins:
            p.release()
        self.store.close()

    # --- lookup and lock ----------------------------------------------------------------------

    @staticmethod
    def support_batched_async_contains():
        return True

    def batched_contains_sync(self, lookup_id, keys, pin=False):
        keys = [self._key(k) for k in keys]
        if not pin:
            return self.store.prefix_match(keys)
        n, p = self.store.prefix_pin(keys)
        with self._lock:
            self._pins.setdefault(lookup_id, []).append(p)
        return n

    async def batched_async_contains(self, lookup_id, keys, pin=False):
        """How many leading keys are stored; with pin, they stay until batched_unpin()."""
        return await self._run(self.batched_contains_sync, lookup_id, keys, pin)

    def batched_unpin(self, lookup_id):
        """End the pins of a lookup; returns how many objects they still held."""
        with self._lock:
            pins = self._pins.pop(lookup_id, [])
        return sum(p.release() for p in pins)




class McStoreConnectorAdapter:
    """LMCache's connector-adapter shape for a remote storage plugin: can_parse(url) and
    create_connector(context) for URLs `mcstore://[SOCKET_PATH][?namespace=NS]` (no path:
    libmc's default socket). `context` is LMCache's ConnectorContext; only its `url` is
    read."""

    schema = "mcstore://"

    def __init__(self, *args, **kwargs):
        pass  # LMCache passes its own arguments; none is needed

    def can_parse(self, url):
        return url.startswith(self.schema)

    @staticmethod
    def parse_url(url):
        """(socket or None, namespace) of an mcstore:// URL."""
        u = urllib.parse.urlsplit(url)
        if u.scheme != "mcstore":
            raise ValueError(f"not an mcstore:// URL: {url!r}")
        path = urllib.parse.unquote(u.netloc + u.path) or None
        if path is not None and not path.startswith("/"):
            path = "/" + path
        if path == "/":
            path = None
        ns = urllib.parse.parse_qs(u.query).get("namespace", [""])[0]
        return path, ns

    def create_connector(self, context):
        socket, ns = self.parse_url(context.url if hasattr(context, "url") else context)
        return McStoreConnector(socket=socket, namespace=ns)

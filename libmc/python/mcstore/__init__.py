"""mcstore: the Python client of the mcstore KV-cache store (pure ctypes over libmc.so).

    import mcstore
    with mcstore.Store() as s:
        s.put("k", b"bytes")
        assert s.get("k") == b"bytes"

The library is $MCSTORE_LIBMC (a path to libmc.so) when set, else the installed libmc.so.0.
Engine adapters: mcstore.sglang, mcstore.vllm, mcstore.lmcache (docs/engines.md).
"""

from ._lib import (ERR_BUSY, ERR_CANCELED, ERR_CORRUPT, ERR_DENIED, ERR_EXISTS, ERR_INTERNAL,
                   ERR_INVALID, ERR_IO, ERR_LEASE_EXPIRED, ERR_NO_SPACE, ERR_NOMEM,
                   ERR_NOT_FOUND, ERR_PROTO, ERR_TIMEOUT, ERR_TOO_LARGE, ERR_UNAVAILABLE,
                   INPROGRESS, KEY_MAX, OK, PRESENT, strerror, version)
from .errors import (Busy, Canceled, Corrupt, Denied, Error, Exists, Internal, Invalid, Io,
                     LeaseExpired, NoMem, NoSpace, NotFound, Proto, Timeout, TooLarge,
                     Unavailable, error_for)
from .store import OpFuture, Pin, Store, address_of

__all__ = [
    "Store", "Pin", "OpFuture", "address_of", "strerror", "version", "error_for",
    "Error", "Invalid", "NoMem", "NotFound", "Exists", "NoSpace", "TooLarge", "Busy",
    "Timeout", "Canceled", "LeaseExpired", "Corrupt", "Denied", "Io", "Proto", "Unavailable",
    "Internal",
    "OK", "INPROGRESS", "PRESENT", "KEY_MAX",
    "ERR_INVALID", "ERR_NOMEM", "ERR_NOT_FOUND", "ERR_EXISTS", "ERR_NO_SPACE", "ERR_TOO_LARGE",
    "ERR_BUSY", "ERR_TIMEOUT", "ERR_CANCELED", "ERR_LEASE_EXPIRED", "ERR_CORRUPT", "ERR_DENIED",
    "ERR_IO", "ERR_PROTO", "ERR_UNAVAILABLE", "ERR_INTERNAL",
]

"""mcstore's exceptions: one class per status code of <mc/mc_status.h>, named after it.

Every class derives from Error, which carries the status in .code. A status with no class
of its own (a newer libmc) raises Error itself.
"""

from . import _lib


class Error(Exception):
    """A failed mcstore call; .code is the MC_ERR_* status (negative)."""

    code = 0

    def __init__(self, code=None, what=""):
        if code is None:
            code = type(self).code
        self.code = code
        msg = _lib.strerror(code)
        super().__init__(f"{what}: {msg} ({code})" if what else f"{msg} ({code})")


def _make(name, code, doc):
    return type(name, (Error,), {"code": code, "__doc__": doc})


Invalid = _make("Invalid", _lib.ERR_INVALID, "MC_ERR_INVALID: an argument is invalid.")
NoMem = _make("NoMem", _lib.ERR_NOMEM, "MC_ERR_NOMEM: out of memory here or in the agent.")
NotFound = _make("NotFound", _lib.ERR_NOT_FOUND, "MC_ERR_NOT_FOUND: no readable version.")
Exists = _make("Exists", _lib.ERR_EXISTS, "MC_ERR_EXISTS: a plain put on a stored key.")
NoSpace = _make("NoSpace", _lib.ERR_NO_SPACE, "MC_ERR_NO_SPACE: room could not be made.")
TooLarge = _make("TooLarge", _lib.ERR_TOO_LARGE, "MC_ERR_TOO_LARGE: object or buffer size.")
Busy = _make("Busy", _lib.ERR_BUSY, "MC_ERR_BUSY: the key or buffer is in use.")
Timeout = _make("Timeout", _lib.ERR_TIMEOUT, "MC_ERR_TIMEOUT: the deadline passed.")
Canceled = _make("Canceled", _lib.ERR_CANCELED, "MC_ERR_CANCELED: canceled or superseded.")
LeaseExpired = _make("LeaseExpired", _lib.ERR_LEASE_EXPIRED,
                     "MC_ERR_LEASE_EXPIRED: a read finished after its lease ended.")
Corrupt = _make("Corrupt", _lib.ERR_CORRUPT, "MC_ERR_CORRUPT: checksum mismatch.")
Denied = _make("Denied", _lib.ERR_DENIED, "MC_ERR_DENIED: credentials refused.")
Io = _make("Io", _lib.ERR_IO, "MC_ERR_IO: an I/O error.")
Proto = _make("Proto", _lib.ERR_PROTO, "MC_ERR_PROTO: the agent broke the protocol.")
Unavailable = _make("Unavailable", _lib.ERR_UNAVAILABLE,
                    "MC_ERR_UNAVAILABLE: the agent or the master cannot be reached.")
Internal = _make("Internal", _lib.ERR_INTERNAL, "MC_ERR_INTERNAL: a bug in mcstore.")

BY_CODE = {cls.code: cls for cls in (Invalid, NoMem, NotFound, Exists, NoSpace, TooLarge, Busy,
                                     Timeout, Canceled, LeaseExpired, Corrupt, Denied, Io, Proto,
                                     Unavailable, Internal)}


def error_for(code, what=""):
    """The exception for status `code` (negative)."""
    return BY_CODE.get(code, Error)(code, what)


def check(code, what=""):
    """Raise the exception for a negative status; return the status otherwise."""
    if code < 0:
        raise error_for(code, what)
    return code

"""ctypes bindings of libmc.so: the library, the prototypes and the status codes.

The library is the one named by $MCSTORE_LIBMC (a path to libmc.so) when set, else the
installed libmc.so.0 found by the dynamic loader. Nothing else is loaded or built.
Every foreign call releases the GIL (ctypes.CDLL does), so threads overlap their waits.
"""

import ctypes
import ctypes.util
import os

# include/mc/mc_status.h
OK = 0
INPROGRESS = 1
PRESENT = 2
ERR_INVALID = -1001
ERR_NOMEM = -1002
ERR_NOT_FOUND = -1003
ERR_EXISTS = -1004
ERR_NO_SPACE = -1005
ERR_TOO_LARGE = -1006
ERR_BUSY = -1007
ERR_TIMEOUT = -1008
ERR_CANCELED = -1009
ERR_LEASE_EXPIRED = -1010
ERR_CORRUPT = -1011
ERR_DENIED = -1012
ERR_IO = -1013
ERR_PROTO = -1020
ERR_UNAVAILABLE = -1030
ERR_INTERNAL = -1040

# include/mc/mc_limits.h
KEY_MAX = 512
PUT_UPSERT = 1 << 0
PUT_PIN_SOFT = 1 << 1
PUT_PIN_HARD = 1 << 2
PUT_NO_CHECKSUM = 1 << 3
PUT_SAME_DOMAIN_OK = 1 << 4
PUT_EXISTS_OK = 1 << 5


class PutOpts(ctypes.Structure):
    """mc_put_opts_t."""

    _fields_ = [
        ("replicas", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("ttl_ms", ctypes.c_uint64),
        ("preferred_node", ctypes.c_char_p),
        ("reserved", ctypes.c_uint64 * 4),
    ]


class ObjInfo(ctypes.Structure):
    """mc_obj_info_t."""

    _fields_ = [
        ("size", ctypes.c_uint64),
        ("replicas", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("version", ctypes.c_uint64),
        ("ttl_remaining_ms", ctypes.c_uint64),
        ("reserved", ctypes.c_uint64 * 4),
    ]


_c_int = ctypes.c_int
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_keys = ctypes.POINTER(ctypes.c_char_p)
_P = ctypes.POINTER

# name: (restype, argtypes)
_PROTOS = {
    "mc_connect": (_c_int, [ctypes.c_char_p, _P(_vp)]),
    "mc_close": (None, [_vp]),
    "mc_put": (_c_int, [_vp, ctypes.c_char_p, _vp, _sz, _P(PutOpts)]),
    "mc_get": (_c_int, [_vp, ctypes.c_char_p, _vp, _sz, _P(_sz)]),
    "mc_exist": (_c_int, [_vp, ctypes.c_char_p]),
    "mc_remove": (_c_int, [_vp, ctypes.c_char_p]),
    "mc_stat": (_c_int, [_vp, ctypes.c_char_p, _P(ObjInfo)]),
    "mc_batch_put": (_c_int, [_vp, _sz, _keys, _P(_vp), _P(_sz), _P(PutOpts), _P(_c_int)]),
    "mc_batch_get": (_c_int, [_vp, _sz, _keys, _P(_vp), _P(_sz), _P(_sz), _P(_c_int)]),
    "mc_batch_exist": (_c_int, [_vp, _sz, _keys, _P(_c_int)]),
    "mc_prefix_match": (_c_int, [_vp, _sz, _keys]),
    "mc_prefix_pin": (_c_int, [_vp, _sz, _keys, _P(ctypes.c_uint64)]),
    "mc_unpin": (_c_int, [_vp, ctypes.c_uint64]),
    "mc_touch": (_c_int, [_vp, _sz, _keys]),
    "mc_remove_prefix": (_c_int, [_vp, ctypes.c_char_p, _P(ctypes.c_uint64)]),
    "mc_stats": (_c_int, [_vp, ctypes.c_char_p, _sz, _P(_sz)]),
    "mc_list": (_c_int, [_vp, ctypes.c_char_p, _P(ctypes.c_uint64), ctypes.c_char_p, _sz]),
    "mc_buf_alloc": (_c_int, [_vp, _sz, _P(_vp)]),
    "mc_buf_free": (_c_int, [_vp, _vp]),
    "mc_get_async": (_c_int, [_vp, ctypes.c_char_p, _vp, _sz, _P(_vp)]),
    "mc_put_async": (_c_int, [_vp, ctypes.c_char_p, _vp, _sz, _P(PutOpts), _P(_vp)]),
    "mc_wait": (_c_int, [_vp, _c_int, _P(_sz)]),
    "mc_cancel": (_c_int, [_vp]),
    "mc_op_free": (None, [_vp]),
    "mc_client_eventfd": (_c_int, [_vp]),
    "mc_client_poll": (_c_int, [_vp]),
    "mc_client_status": (_c_int, [_vp]),
    "mc_strerror": (ctypes.c_char_p, [_c_int]),
    "mc_version": (ctypes.c_char_p, []),
}


def _open():
    path = os.environ.get("MCSTORE_LIBMC")
    if path:
        return ctypes.CDLL(path)
    try:
        return ctypes.CDLL("libmc.so.0")
    except OSError:
        found = ctypes.util.find_library("mc")
        if found is None:
            raise
        return ctypes.CDLL(found)


lib = _open()
for _name, (_res, _args) in _PROTOS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def strerror(code):
    """mc_strerror: a short English description of any status code."""
    return lib.mc_strerror(int(code)).decode()


def version():
    """The version of the libmc in use ("MAJOR.MINOR.PATCH")."""
    return lib.mc_version().decode()

# SPDX-License-Identifier: MIT
"""libtpurt through cffi in ABI mode (declarations: _cdef.py)."""
import os

try:
    # cffi's out-of-line ABI mode, as scripts/vm-run.sh generates it for
    # the guest: the declarations come parsed, so no pycparser at start-up
    # (two seconds of the guest's emulated CPU)
    from ._ffi import ffi
except ImportError:
    import cffi
    from ._cdef import CDEF
    ffi = cffi.FFI()
    ffi.cdef(CDEF)


def _find_lib():
    env = os.environ.get("TPUEMU_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))
    cand = os.path.join(top, "build", "lib", "libtpurt.so.0")
    if os.path.exists(cand):
        return cand
    return "libtpurt.so.0"	# the loader's path (an installed libtpurt)


lib = ffi.dlopen(_find_lib())


class TpurtError(RuntimeError):
    """A libtpurt call failed; the message is tpurt_last_error()'s."""


def check(rc, what):
    if rc < 0:
        msg = lib.tpurt_last_error()
        msg = ffi.string(msg).decode() if msg != ffi.NULL else ""
        raise TpurtError("%s: %s" % (what, msg or os.strerror(-rc)))
    return rc


_dev = None


def device():
    """The device, opened once: the render node, or the in-process one with
    TPURT_DEVICE=sim."""
    global _dev
    if _dev is None:
        p = ffi.new("struct tpurt_device **")
        check(lib.tpurt_open(p), "tpurt_open")
        _dev = p[0]
    return _dev

# SPDX-License-Identifier: MIT
"""jax.experimental.checkify as Pallas kernels use it: checkify.check(pred,
msg, *args, **kwargs) in a kernel body (or on the host) and
checkify.checkify(f), which runs f and returns (err, out). In a kernel a
check is recorded on the device: the first failing check of the call (in
grid order) writes its number and its format arguments (integers: program
ids, SMEM scalars, Python ints) into a hidden SMEM output, which
pallas_call reads back (pallas/_checkify.py)."""
import numpy as _np

from . import _trace

user_checks = frozenset({"user"})
nan_checks = frozenset({"nan"})
div_checks = frozenset({"div"})
index_checks = frozenset({"index"})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


class JaxRuntimeError(RuntimeError):
    """A failed check, raised by err.throw() (or by a check outside
    checkify that fails on the host)."""


class Error:
    """checkify.checkify's error value: the first failed check's message,
    or none."""

    def __init__(self, message=None):
        self._message = message

    def get(self):
        """The message of the failed check, or None."""
        return self._message

    def get_exception(self):
        return JaxRuntimeError(self._message) if self._message is not None else None

    def throw(self):
        if self._message is not None:
            raise JaxRuntimeError(self._message)

    def __repr__(self):
        return "Error(%s)" % ("no error" if self._message is None else repr(self._message))


_active = []		# the errors of the checkify calls running, innermost last


def active():
    """Whether a checkify.checkify call is running (pallas_call then gives
    its kernels a check output)."""
    return bool(_active)


def record(message):
    """A failed check's message: the innermost checkify call's error, if it
    has none yet (the first failure counts)."""
    if _active and _active[-1][0] is None:
        _active[-1][0] = message


def check(pred, msg, *fmt_args, **fmt_kwargs):
    """checkify.check: @msg (a str.format template of @fmt_args and
    @fmt_kwargs) is the error where @pred is false. In a kernel body, a
    device check; on the host, of concrete values: recorded under
    checkify.checkify, raised as JaxRuntimeError otherwise."""
    if not isinstance(msg, str):
        raise TypeError("checkify.check: the message must be a str, not %r" % (msg,))
    if _trace._rec is not None:
        from .pallas import _checkify
        _checkify.kernel_check(pred, msg, fmt_args, fmt_kwargs)
        return
    if bool(_np.all(_np.asarray(pred))):
        return
    message = msg.format(*[_np.asarray(a).item() if _np.ndim(a) == 0 else a
                           for a in fmt_args],
                         **{k: _np.asarray(v).item() if _np.ndim(v) == 0 else v
                            for k, v in fmt_kwargs.items()})
    if not _active:
        raise JaxRuntimeError(message)
    record(message)


def checkify(f, errors=user_checks):
    """checkify.checkify(f): a function returning (err, f's result), err
    the first failed check's (Error; err.throw() raises it). Only user
    checks are made: the automatic ones (NaN, division, indexing) are
    refused by name."""
    extra = set(errors) - user_checks
    if extra:
        raise NotImplementedError("checkify.checkify(errors=%s): tpuemu makes user checks "
                                  "(checkify.check) only" % sorted(extra))

    def checked(*args, **kwargs):
        _active.append([None])
        try:
            out = f(*args, **kwargs)
        finally:
            message = _active.pop()[0]
        return Error(message), out
    checked.__name__ = getattr(f, "__name__", "checked")
    return checked

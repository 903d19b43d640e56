# SPDX-License-Identifier: MIT
"""pl.debug_print: the device records a format's number and the values
(TPU_OP_DEBUG_PRINT); libtpurt keeps the format and, after the job, writes
each record as a line to stderr, in the grid's step order."""

import numbers
import string

import numpy as _np

from .. import _trace
from .._trace import Value, trace_error


def _escape(text):
    """A format as the statement syntax's "..." string."""
    return (text.replace("\\", "\\\\").replace('"', '\\"')
            .replace("\n", "\\n").replace("\t", "\\t"))


def _braces(text):
    return text.replace("{", "{{").replace("}", "}}")


# pl.debug_print in a pallas_call's index map: the maps are traced before
# the kernel, into the index-map language, which has no print; their
# prints are kept here (while a map runs) and put at the start of the
# kernel, which runs at each grid step, as the maps are evaluated
_map_prints = []
_in_map = [False]


def _keep_map_print(fmt, args):
    for a in args:
        if isinstance(a, Value):
            raise trace_error("pl.debug_print(%r) in an index map: the grid indices and "
                              "scalar-prefetch values cannot be printed there; print "
                              "Python values, or print pl.program_id in the kernel" % (fmt,))
    _map_prints.append((fmt, args))


def in_index_map(fn, *args):
    """fn(*args), an index map being traced: its prints kept for the kernel."""
    _in_map[0] = True
    try:
        return fn(*args)
    finally:
        _in_map[0] = False


def start_map_prints():
    del _map_prints[:]


def emit_map_prints():
    """The prints the index maps made, at the start of the kernel."""
    kept = list(_map_prints)
    del _map_prints[:]
    for fmt, args in kept:
        debug_print(fmt, *args)


# XLA's names of the dtypes, as TPU's log prints a value after a format
_XLA_NAMES = {"int32": "s32", "uint32": "u32", "float32": "f32", "bool": "pred",
              "int16": "s16", "uint16": "u16", "int8": "s8", "uint8": "u8",
              "bfloat16": "bf16"}


def _xla_scalar(a):
    """(XLA dtype name, value or None if traced) of a scalar debug_print
    argument without a placeholder."""
    if isinstance(a, _np.generic):
        return _XLA_NAMES.get(a.dtype.name, a.dtype.name), a.item()
    if isinstance(a, bool):
        return "pred", a
    if isinstance(a, numbers.Integral):
        return "s32", int(a)
    if isinstance(a, numbers.Real) and not isinstance(a, Value):
        return "f32", float(a)
    if isinstance(a, Value) and a.shape == () and a.dt is not None:
        return _XLA_NAMES.get(a.dt.name, a.dt.name), None
    raise trace_error("pl.debug_print: without {} placeholders the arguments are "
                      "scalars, printed after the format; %r is not (a vector needs "
                      "a format ending in {})" % (a,))


def _after_format(fmt, args):
    """A format without placeholders, the arguments after it as TPU's log
    prints them: "DONE " and 123 give "DONE s32[] 123"."""
    out, vals = [fmt], []
    for k, a in enumerate(args):
        name, v = _xla_scalar(a)
        if v is None:
            out.append("%s%s[] {}" % (" " if k else "", name))
            vals.append(a)
        else:
            if isinstance(v, float):	# XLA prints 123.0 as 123
                v = _np.format_float_positional(_np.float32(v), trim="-")
            out.append("%s%s[] %s" % (" " if k else "", name, v))
    return "".join(out), vals	# the format stays a format: {{ is still {


def debug_print(fmt, *args):
    """pl.debug_print(fmt, *args): print fmt with each {} replaced by the
    next argument, once per grid step the statement runs (under pl.when,
    at every trip of a device loop). Arguments: scalars (pl.program_id,
    SMEM elements, scalar-core arithmetic, bools, float SMEM values),
    arrays (their elements, NumPy style) and Python numbers (put into the
    format while tracing). Only {} placeholders, as Pallas's. A format
    without placeholders gets scalar arguments after it, as TPU's log
    prints them (pl.debug_print("DONE ", 123) prints "DONE s32[] 123")."""
    if not isinstance(fmt, str):
        raise trace_error("pl.debug_print: the format must be a str, not %r" % (fmt,))
    if _in_map[0] and _trace._rec is None:
        return _keep_map_print(fmt, args)
    rec = _trace.recorder()
    try:
        parts = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise trace_error("pl.debug_print(%r): %s" % (fmt, e)) from None
    fields = [p for p in parts if p[1] is not None]
    if not fields and args:
        fmt, args = _after_format(fmt, args)
        parts = list(string.Formatter().parse(fmt))
        fields = [p for p in parts if p[1] is not None]
    for _, name, spec, conv in fields:
        if name or spec or conv:
            raise trace_error("pl.debug_print(%r): only {} placeholders are supported, "
                              "not {%s%s%s}" % (fmt, name, "!" + conv if conv else "",
                                                ":" + spec if spec else ""))
    if len(fields) != len(args):
        raise trace_error("pl.debug_print(%r): %d {} placeholder%s for %d argument%s"
                          % (fmt, len(fields), "" if len(fields) == 1 else "s",
                             len(args), "" if len(args) == 1 else "s"))
    out, texts = [], []
    it = iter(args)
    for literal, name, _, _ in parts:
        out.append(_braces(literal))
        if name is None:
            continue
        a = next(it)
        if isinstance(a, _np.generic):
            a = a.item()
        if isinstance(a, (bool, numbers.Number)) and not isinstance(a, Value):
            out.append(_braces(str(a)))	# known now: Python prints it
            continue
        if not isinstance(a, Value):
            raise trace_error("pl.debug_print: cannot print %r (%s): traced values and "
                              "Python numbers only" % (a, type(a).__name__))
        out.append("{}")
        texts.append(_trace._fmt(a))
    rec.emit('pl.debug_print("%s"%s)' % (_escape("".join(out)),
                                          "".join(", " + t for t in texts)))

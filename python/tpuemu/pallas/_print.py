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


def debug_print(fmt, *args):
    """pl.debug_print(fmt, *args): print fmt with each {} replaced by the
    next argument, once per grid step the statement runs (under pl.when,
    at every trip of a device loop). Arguments: scalars (pl.program_id,
    SMEM elements, scalar-core arithmetic, bools, float SMEM values),
    arrays (their elements, NumPy style) and Python numbers (put into the
    format while tracing). Only {} placeholders, as Pallas's."""
    if not isinstance(fmt, str):
        raise trace_error("pl.debug_print: the format must be a str, not %r" % (fmt,))
    rec = _trace.recorder()
    try:
        parts = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise trace_error("pl.debug_print(%r): %s" % (fmt, e)) from None
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

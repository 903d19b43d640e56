# SPDX-License-Identifier: MIT
"""Errors of the kernel's compilation, as jax._src.pallas.mosaic.error_handling
names them.

On a TPU, Mosaic compiles the kernel Pallas lowered, and a refusal comes
back as MosaicError (VerificationError when the lowered IR fails MLIR's
verifier) whose traceback ends at the kernel's Python line, rebuilt from
the MLIR location of the refused operation. Here libtpurt is the compiler:
it checks each statement pallas_call traced and refuses one it cannot
compile, and pallas_call raises that as MosaicError; libtpurt's store
check (a value of another shape or dtype than the ref it is stored into,
an array stored into one SMEM element), which is MLIR's verification of
memref.store / vector.store on a TPU, as VerificationError. The message
is libtpurt's, with the statement and the kernel lines it was traced
from; the traceback ends with the kernel's frames, down to the line that
made the refused operation, as JAX's does.

MosaicError derives from tpuemu's TraceError (JAX's from Exception), so
`except pl.TraceError` clauses written for tpuemu still catch it.
VerificationError keeps libtpurt's message as it is: JAX prefixes its
own with a request to file a bug against JAX, which is not where a
refused statement here belongs.

parse_location_string and traceback_from_raw_frames read an MLIR location
as JAX's do, for code that handles Mosaic's messages itself."""
import collections
import re
import sys
import types

from ..._trace import TraceError

__all__ = ["MosaicError", "VerificationError", "RawFrame", "parse_location_string",
           "traceback_from_raw_frames"]

RawFrame = collections.namedtuple("RawFrame", ["func_name", "filename", "lineno", "colno"])


class MosaicError(TraceError):
    """The kernel's compilation refused it: a statement libtpurt cannot
    compile (Mosaic's error on a TPU)."""


class VerificationError(MosaicError):
    """A statement that fails libtpurt's store check (MLIR's verifier on a
    TPU)."""


# libtpurt's store check (stmt_lower.c store(), stmt_memory.c's SMEM
# element store): the verifier's memref.store / vector.store type rule
_STORE_CHECK = re.compile(r"^statement \d+: (a (value of shape .*|\S+ value) stored into '"
                          r"|an SMEM element takes one value, not )")


def is_verification(msg):
    """Whether libtpurt's message @msg is its store check's."""
    return _STORE_CHECK.match(msg) is not None


# --- MLIR locations ---

class _Scan:
    """A reader of MLIR location text: loc(...), "name"(...), callsite(a at
    b), "file":line:col[ to line:col], fused[...], unknown."""

    def __init__(self, text, pos):
        self.t = text
        self.i = pos
        self.frames = []

    def fail(self, what):
        raise ValueError("bad MLIR location at %d (%s): %s" % (self.i, what, self.t))

    def skip(self):
        while self.i < len(self.t) and self.t[self.i] in " \t":
            self.i += 1

    def take(self, s):
        self.skip()
        if self.t.startswith(s, self.i):
            self.i += len(s)
            return True
        return False

    def need(self, s):
        if not self.take(s):
            self.fail("expected %r" % s)

    def string(self):
        self.skip()
        if not self.t.startswith('"', self.i):
            self.fail("expected a string")
        j = self.i + 1
        out = []
        while j < len(self.t) and self.t[j] != '"':
            if self.t[j] == "\\" and j + 1 < len(self.t):
                j += 1
            out.append(self.t[j])
            j += 1
        if j >= len(self.t):
            self.fail("unterminated string")
        self.i = j + 1
        return "".join(out)

    def number(self):
        self.skip()
        m = re.compile(r"[0-9]+").match(self.t, self.i)
        if not m:
            self.fail("expected a number")
        self.i = m.end()
        return int(m.group(0))

    def location(self):
        """One location; a name whose child is a file position is a frame."""
        self.skip()
        if self.t.startswith('"', self.i):
            s = self.string()
            if self.take(":"):		# "file":line:col
                line = self.number()
                self.need(":")
                col = self.number()
                if self.take("to"):
                    if not self.take(":"):
                        self.number()
                        self.need(":")
                    self.number()
                return ("file", s, line, col)
            if self.take("("):		# "name"(child)
                at = len(self.frames)
                child = self.location()
                self.need(")")
                if child[0] == "file":
                    self.frames.insert(at, RawFrame(s, child[1], child[2], child[3]))
                return ("name", s)
            return ("name", s)
        if self.take("callsite("):
            self.location()
            self.need("at")
            self.location()
            self.need(")")
            return ("callsite",)
        if self.take("fused"):
            if self.take("<"):
                depth = 1
                while depth and self.i < len(self.t):
                    depth += {"<": 1, ">": -1}.get(self.t[self.i], 0)
                    self.i += 1
            self.need("[")
            if not self.take("]"):
                self.location()
                while self.take(","):
                    self.location()
                self.need("]")
            return ("fused",)
        if self.take("unknown"):
            return ("unknown",)
        self.fail("expected a location")


def parse_location_string(location_string):
    """(name, frames) of the one MLIR location `loc("name"(<callsite>))` in
    @location_string: name the location's name, frames a RawFrame per
    `"fn"("file":line:col)` in it, the innermost call first (as callsite(callee
    at caller) nests them). ValueError if the string has no location, or
    more than one."""
    found = []
    pos = 0
    while True:
        start = location_string.find("loc(", pos)
        if start < 0:
            break
        sc = _Scan(location_string, start + 4)
        try:
            sc.skip()
            name = sc.string()
            if sc.take("("):
                sc.location()
                sc.need(")")
            sc.need(")")
        except ValueError:
            pos = start + 4
            continue
        found.append((name, sc.frames))
        pos = sc.i
    if not found:
        raise ValueError("Could not find location in string %s" % location_string)
    if len(found) > 1:
        raise ValueError("More than one location found in string: %s" % location_string)
    return found[0]


# --- tracebacks ---

def _probe():
    return sys._getframe()


def _frame(filename, func_name, lineno):
    """A frame object whose code is @func_name of @filename, starting at
    @lineno: what a traceback entry shows (the line comes from tb_lineno and
    the file; a first line after it, _probe's own, sent pytest's source
    lookup past the end of its list, an INTERNALERROR that ends the run)."""
    kw = {"co_firstlineno": max(1, lineno)}
    if sys.version_info >= (3, 11):
        # no positions (3.11's location table: entries of kind 15, "no
        # location", of up to 8 code units each), so that no traceback
        # printer puts column markers from this code under the kernel's line
        n, table = len(_probe.__code__.co_code) // 2, bytearray()
        while n > 0:
            table.append(0x80 | (15 << 3) | (min(n, 8) - 1))
            n -= min(n, 8)
        kw.update(co_qualname=func_name, co_linetable=bytes(table))
    code = _probe.__code__.replace(co_filename=filename, co_name=func_name, **kw)
    return types.FunctionType(code, {"__name__": "tpuemu_kernel", "sys": sys})()


def traceback_from_raw_frames(frames):
    """A traceback of @frames (RawFrame, the innermost first, as
    parse_location_string gives them) whose last entry is frames[0]; None
    for no frames."""
    tb = None
    for fr in frames:		# innermost first: each outer one links to it
        tb = types.TracebackType(tb, _frame(fr.filename, fr.func_name, fr.lineno), 0,
                                  fr.lineno)
    return tb


def from_libtpurt(msg, loc):
    """The exception for libtpurt's refusal @msg of the statement traced at
    @loc (_trace.Loc): MosaicError, VerificationError for the store check,
    its message naming the kernel lines and its traceback ending at the line
    that made the refused operation."""
    frames, op_at = loc.frames, None
    # the store check refuses the statement itself (its line, as MLIR's
    # memref.store location); else the part of it libtpurt points at
    made = None if is_verification(msg) else loc.made_at(msg)
    if made:
        frames = made
        op_at = _where_text(made[-1])
        if op_at == str(loc):
            op_at = None
    text = msg + ("\n  at %s" % op_at if op_at else "") + "\n  traced from %s" % loc
    err = (VerificationError if is_verification(msg) else MosaicError)(text)
    err.__traceback__ = traceback_from_raw_frames(
        [RawFrame(name, fn, line, 0) for fn, line, name in reversed(frames)])
    return err


def _where_text(frame):
    import linecache
    fn, line, _ = frame
    src = linecache.getline(fn, line).strip()
    return "%s:%d: %s" % (fn, line, src) if src else "%s:%d" % (fn, line)


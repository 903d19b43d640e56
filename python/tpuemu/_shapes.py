# SPDX-License-Identifier: MIT
"""Static shapes and dtypes of traced values, as JAX gives them while
tracing (x.shape, x.dtype, x.ndim of any value a kernel computes). The
device sees values in the 2-D view refs have; these are the shapes JAX's
rules give, from the operands' shapes: NumPy broadcasting, reductions,
dots, transposes, concatenations, casts. None only where an operand's is
not known either."""
import re

_KW = re.compile(r"^(\w+)=(.*)$")


def _kw(v):
    """A traced call's keyword arguments, as texts."""
    out = {}
    for a in v.args:
        if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and a[0] == "__kw__":
            m = _KW.match(a[1])
            if m:
                out[m.group(1)] = m.group(2)
    return out


def _pos(v):
    return [a for a in v.args
            if not (isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and a[0] == "__kw__")]


def shape_of(x):
    from ._trace import Value, Ref, Window, DType, _DT
    if isinstance(x, Value):
        return x.shape
    if isinstance(x, Ref):
        return x.shape
    if isinstance(x, (bool, int, float)):
        return ()
    if isinstance(x, (DType, _DT, str)) or x is None:
        return None
    try:
        import numpy as np
        if isinstance(x, np.generic):
            return ()
    except ImportError:
        pass
    return getattr(x, "shape", None) if not isinstance(x, Window) else None


def broadcast(*shapes):
    """NumPy's broadcast of known shapes, None if one is unknown or they
    do not broadcast."""
    if any(s is None for s in shapes):
        return None
    n = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(n):
        size = 1
        for s in shapes:
            k = d - (n - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size not in (1, s[k]):
                return None
            size = s[k]
        out.append(size)
    return tuple(out)


def _dt_name(text):
    from ._trace import as_dtype
    try:
        return as_dtype(text.replace("jnp.", "").replace("np.", "").strip())
    except (TypeError, KeyError, AttributeError):
        return None


def _reduce(v, x, name):
    s = shape_of(x)
    kw = _kw(v)
    keep = kw.get("keepdims") == "True"
    if s is None:
        return None
    if "axis" not in kw:
        return (1,) * len(s) if keep else ()
    try:
        import ast
        axes = ast.literal_eval(kw["axis"])	# an int or a tuple of them
        axes = {int(a) % len(s) for a in (axes if isinstance(axes, tuple) else (axes,))}
    except (ValueError, SyntaxError, TypeError, ZeroDivisionError):
        return None
    return tuple(1 if d in axes else n for d, n in enumerate(s)) if keep else \
        tuple(n for d, n in enumerate(s) if d not in axes)


def _dot(a, b):
    sa, sb = shape_of(a), shape_of(b)
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
        return None
    return (sa[0], sb[1])	# an x.T operand's shape is x's transposed


# element-wise functions of the statement syntax: the broadcast of their operands
_FLOAT_FNS = {"exp", "exp2", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "tanh", "sin",
              "cos", "logistic", "erf", "erf_inv", "gelu", "silu", "sigmoid", "softmax",
              "log_softmax", "relu6", "divide", "true_divide", "tan"}
_BOOL_FNS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
             "logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "is_finite",
             "isfinite", "isinf"}
_SHAPED = {"zeros", "full", "broadcasted_iota", "prng_random_bits", "reshape", "iota"}


def infer(v):
    """(shape, dtype) of traced value @v from its operands, None where
    not known."""
    from ._trace import _result_dt, dt_of, float32, int32, bool_, is_float_dt, _promote
    k = v.kind
    if k == "text":
        return ((), None) if v.scalar else (None, None)
    if k == "op":
        a, b = v.args
        if v.text == "@":
            return _dot(a, b), _result_dt("*", a, b)
        return broadcast(shape_of(a), shape_of(b)), None
    if k == "unop":
        return shape_of(v.args[0]), None
    if k == "attr" and v.text == "T":
        s = shape_of(v.args[0])
        return (tuple(reversed(s)) if s is not None else None), dt_of(v.args[0])
    if k == "method" and v.text == "astype":
        return shape_of(v.args[0]), None
    if k != "call":
        return None, None
    fn = v.text.rsplit(".", 1)[-1]
    pos = _pos(v)
    kw = _kw(v)
    vals = [a for a in pos if not isinstance(a, (tuple, str)) and shape_of(a) is not None
            or isinstance(a, (int, float, bool))]
    if fn in ("sum", "max", "min", "mean", "argmax", "argmin", "prod"):
        x = pos[0]
        d = dt_of(x)
        if fn in ("argmax", "argmin"):
            d = int32
        elif fn == "mean":
            d = d if is_float_dt(d) else float32
        elif fn == "sum" and (d is bool_ or getattr(d, "name", None) == "int16"):
            d = int32	# jnp's sum of int16 is int32 (the device sums the words so)
        return _reduce(v, x, fn), d if not isinstance(d, str) else None
    if fn == "dot":
        pet = _dt_name(kw["preferred_element_type"]) if "preferred_element_type" in kw \
            else None
        return _dot(pos[0], pos[1]), pet or _result_dt("*", pos[0], pos[1])
    if fn == "transpose":
        s = shape_of(pos[0])
        if s is None:
            return None, dt_of(pos[0])
        axes = pos[1] if len(pos) > 1 else tuple(reversed(range(len(s))))
        return tuple(s[a] for a in axes), dt_of(pos[0])
    if fn in ("swapaxes", "moveaxis"):
        s = shape_of(pos[0])
        if s is None or len(pos) < 3:
            return None, dt_of(pos[0])
        a, b = int(pos[1]) % len(s), int(pos[2]) % len(s)
        if fn == "swapaxes":
            out = list(s)
            out[a], out[b] = s[b], s[a]
        else:
            out = [n for d, n in enumerate(s) if d != a]
            out.insert(b, s[a])
        return tuple(out), dt_of(pos[0])
    if fn in ("roll",):
        return shape_of(pos[0]), dt_of(pos[0])
    if fn == "take_along_axis":
        return shape_of(pos[1]), dt_of(pos[0])
    if fn == "concatenate":
        parts = pos[0]
        shapes = [shape_of(p) for p in parts]
        axis = int(kw.get("axis", 0))
        if any(s is None for s in shapes) or not shapes or not shapes[0]:
            return None, None
        axis %= len(shapes[0])
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        d = None
        for p in parts:
            d = dt_of(p) if d is None else _promote(d, dt_of(p))
        return tuple(out), d if not isinstance(d, str) else None
    if fn in ("zeros_like", "ones_like", "full_like"):
        return shape_of(pos[0]), dt_of(pos[0])
    if fn in _SHAPED:	# their shapes are set where they are made
        if fn == "reshape":
            return None, dt_of(pos[0])
        return None, (_dt_name(kw["dtype"]) if "dtype" in kw else None)
    if fn == "bitcast":
        return shape_of(pos[0]), None
    if fn == "where":
        return broadcast(*[shape_of(p) for p in pos[:3]]), \
            (_result_dt("+", pos[1], pos[2]) if len(pos) >= 3 else None)
    if fn == "clamp":	# lax.clamp(lo, x, hi): x's dtype
        return broadcast(*[shape_of(p) for p in pos]), dt_of(pos[1])
    # element-wise: the operands' broadcast
    shape = broadcast(*[shape_of(p) for p in vals]) if vals else None
    if fn in _BOOL_FNS:
        return shape, bool_
    d = None
    for p in vals:
        d = dt_of(p) if d is None else _promote(d, dt_of(p))
    if isinstance(d, str):
        d = float32 if d == "weak float" else int32
    if fn in _FLOAT_FNS and d is not None and not is_float_dt(d):
        d = float32
    return shape, d

# SPDX-License-Identifier: MIT
"""Reverse-mode differentiation (jax.vjp, jax.grad, jax.custom_vjp), on the
host and in a kernel body alike.

A differentiated function's inputs become Tracers: each jnp / lax call on
one computes its primal the ordinary way (a host array, or a traced kernel
Value) and appends a node to the tape of its level, with the rule that
maps the output's cotangent to its operands'. The rules are written in
jnp and lax, so the backward pass is traced into the kernel like any other
code, and a backward pass run on a higher level's Tracers is itself
recorded: vjp of vjp (jax.jvp is that), grad of grad.

Only the functions with a rule below are differentiable; any other jnp
function given a Tracer is refused by name. pl.pallas_call is not
differentiated (JAX transposes few kernels either): jax.custom_vjp around
it gives its backward, as JAX's flash attention does.
"""
import functools
import inspect
import math

from . import _pytree

_levels = [0]	# tapes made so far: a new tape's level is above every open one
_open = [0]	# differentiations running: jnp's calls look for Tracers only then


def active():
    return _open[0] > 0


class _Tape:
    def __init__(self):
        _levels[0] += 1
        self.level = _levels[0]
        # (out Tracers, operand Tracers, rule: the outs' cts -> (operand, ct) pairs)
        self.nodes = []


class Tracer:
    """A value being differentiated: its primal and its place on a tape."""
    __array_priority__ = 1000	# NumPy's operators defer to ours

    def __init__(self, primal, tape):
        self.primal = primal
        self.tape = tape

    shape = property(lambda self: tuple(getattr(self.primal, "shape", ())))
    dtype = property(lambda self: _dtype(self.primal))
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    T = property(lambda self: _jnp().transpose(self))

    def __repr__(self):
        return "Tracer(%r)" % (self.primal,)

    def __len__(self):
        return self.shape[0]

    def __bool__(self):
        raise TypeError("a value being differentiated (jax.grad, jax.vjp) has no truth "
                        "value: use jnp.where or lax.cond")

    def __getitem__(self, idx):
        return getitem(self, idx)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def astype(self, dtype):
        return _jnp().astype(self, dtype)

    def reshape(self, *shape, **kw):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return _jnp().reshape(self, tuple(shape), **kw)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return _jnp().transpose(self, tuple(axes) if axes else None)

    def sum(self, *a, **kw):
        return _jnp().sum(self, *a, **kw)

    def mean(self, *a, **kw):
        return _jnp().mean(self, *a, **kw)

    def max(self, *a, **kw):
        return _jnp().max(self, *a, **kw)

    def min(self, *a, **kw):
        return _jnp().min(self, *a, **kw)

    def squeeze(self, *a, **kw):
        return _jnp().squeeze(self, *a, **kw)

    def ravel(self):
        return _jnp().reshape(self, (-1,))


def _binop(name, swap=False):
    def op(self, other):
        f = getattr(_jnp(), name)
        return f(other, self) if swap else f(self, other)
    return op


for _m, _f in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
               ("truediv", "divide"), ("pow", "power"), ("matmul", "matmul"),
               ("mod", "mod"), ("floordiv", "floor_divide")):
    setattr(Tracer, "__%s__" % _m, _binop(_f))
    setattr(Tracer, "__r%s__" % _m, _binop(_f, swap=True))
for _m, _f in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
               ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")):
    setattr(Tracer, "__%s__" % _m, _binop(_f))
Tracer.__neg__ = lambda self: _jnp().negative(self)
Tracer.__pos__ = lambda self: self
Tracer.__abs__ = lambda self: _jnp().abs(self)
Tracer.__hash__ = object.__hash__


def _jnp():
    from . import numpy as jnp
    return jnp


def _lax():
    from . import lax
    return lax


def _dtype(x):
    if isinstance(x, Tracer):
        return x.dtype
    d = getattr(x, "dtype", None)
    if d is not None:
        return d
    import numpy as np
    return np.dtype(np.float32) if isinstance(x, float) else np.dtype(np.int32)


def _is_float(d):
    from . import _trace
    if isinstance(d, _trace.DTypeOf):	# not known while tracing: differentiated
        return True
    if isinstance(d, _trace.DType):
        return d.name in ("float32", "bfloat16")
    name = getattr(d, "name", str(d))
    return "float" in name or name == "bfloat16"


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _leaves(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _leaves(y)
    elif isinstance(x, Tracer):
        yield x


def top_tape(args, kw=None):
    """The tape of the innermost differentiation that @args reach, or None."""
    top = None
    for t in _leaves([args, list((kw or {}).values())]):
        if top is None or t.tape.level > top.level:
            top = t.tape
    return top


def _rebuilt(x, items):
    """@x's list or tuple type (a NamedTuple's too) holding @items."""
    return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)


def _unwrap(x, tape):
    if isinstance(x, Tracer) and x.tape is tape:
        return x.primal
    if isinstance(x, (list, tuple)):
        return _rebuilt(x, [_unwrap(y, tape) for y in x])
    return x


def constant(x):
    """@x with every level's Tracers replaced by their primals (lax.stop_gradient)."""
    if isinstance(x, Tracer):
        return constant(x.primal)
    if isinstance(x, (list, tuple)):
        return _rebuilt(x, [constant(y) for y in x])
    return x


def _mine(x, tape):
    return [t for t in _leaves(x) if t.tape is tape]


def _record(tape, out_primal, operands, rule):
    out = Tracer(out_primal, tape)
    tape.nodes.append(([out], operands, lambda gs: rule(gs[0])))
    return out


def apply(name, fn, args, kw):
    """jnp.@name (fn) called with Tracers among @args."""
    tape = top_tape(args, kw)
    if _mine(list(kw.values()), tape):
        raise TypeError("jax.vjp: jnp.%s: a keyword argument is being differentiated; "
                        "only positional operands can be" % name)
    pargs = [_unwrap(a, tape) for a in args]
    out = fn(*pargs, **kw)
    if name in _NONDIFF or not _is_float(_dtype(out)):
        return out
    rule = _RULES.get(name)
    if rule is None:
        raise TypeError("jax.vjp / jax.grad: jnp.%s has no derivative rule in tpuemu "
                        "(differentiable: %s); wrap it in jax.custom_vjp"
                        % (name, ", ".join(sorted(_RULES))))
    operands = [_mine(a, tape) for a in args]

    def back(g):
        cts = rule(g, pargs, kw, out)
        flat = []
        for ops, ct in zip(operands, cts):
            if not ops:
                continue
            ct = ct if isinstance(ct, (list, tuple)) else [ct]
            flat.extend(zip(ops, ct))
        return flat
    return _record(tape, out, [t for ops in operands for t in ops], back)


def wraps_differentiable(name, fn):
    """@fn (a lax function that is not jnp's) dispatching Tracers to apply."""
    @functools.wraps(fn)
    def f(*args, **kw):
        if top_tape(args, kw) is not None:
            return apply(name, f, args, kw)
        return fn(*args, **kw)
    return f


# --- the rules: (g, operands' primals, keywords, output) -> operands' cts ---

def _shape(x):
    return tuple(getattr(x, "shape", ()) or ())


def unbroadcast(g, x):
    """@g summed down to @x's shape (undoing a broadcast to @g's)."""
    jnp = _jnp()
    want, have = _shape(x), _shape(g)
    if want == have:
        return g
    lead = len(have) - len(want)
    if lead:
        g = jnp.sum(g, axis=tuple(range(lead)))
    ones = tuple(i for i, d in enumerate(want) if d == 1 and _shape(g)[i] != 1)
    if ones:
        g = jnp.sum(g, axis=ones, keepdims=True)
    return g if _shape(g) == want else jnp.reshape(g, want)


def _elementwise(dfdx):
    """A rule of a unary function from its derivative (of x and y = f(x))."""
    def rule(g, args, kw, y):
        return [g * dfdx(args[0], y)]
    return rule


def _r_add(g, a, kw, y):
    return [unbroadcast(g, a[0]), unbroadcast(g, a[1])]


def _r_sub(g, a, kw, y):
    return [unbroadcast(g, a[0]), unbroadcast(-g, a[1])]


def _r_mul(g, a, kw, y):
    return [unbroadcast(g * a[1], a[0]), unbroadcast(g * a[0], a[1])]


def _r_div(g, a, kw, y):
    return [unbroadcast(g / a[1], a[0]), unbroadcast(-g * y / a[1], a[1])]


def _r_pow(g, a, kw, y):
    jnp = _jnp()
    x, p = a
    ga = unbroadcast(g * p * jnp.power(x, p - 1), x)
    gp = unbroadcast(g * y * jnp.log(jnp.where(x > 0, x, 1.0)), p) if _shape(p) or \
        isinstance(p, Tracer) else None
    return [ga, gp]


def _chooser():
    """maximum / minimum: the cotangent to the operand chosen, halved at ties
    (JAX's balanced rule)."""
    def rule(g, a, kw, y):
        jnp = _jnp()
        x0, x1 = a
        e0, e1 = jnp.equal(x0, y), jnp.equal(x1, y)
        w0 = jnp.where(e0, jnp.where(e1, 0.5, 1.0), 0.0)
        w1 = jnp.where(e1, jnp.where(e0, 0.5, 1.0), 0.0)
        return [unbroadcast(g * w0, x0), unbroadcast(g * w1, x1)]
    return rule


def _r_where(g, a, kw, y):
    jnp = _jnp()
    c = a[0]
    return [None, unbroadcast(jnp.where(c, g, 0.0), a[1]),
            unbroadcast(jnp.where(c, 0.0, g), a[2])]


def _r_clip(g, a, kw, y):
    jnp = _jnp()
    x = a[0]
    lo = a[1] if len(a) > 1 else kw.get("a_min", kw.get("min"))
    hi = a[2] if len(a) > 2 else kw.get("a_max", kw.get("max"))
    inside = jnp.full_like(g, 1.0)
    if lo is not None:
        inside = jnp.where(x >= lo, inside, 0.0)
    if hi is not None:
        inside = jnp.where(x <= hi, inside, 0.0)
    return [g * inside]


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(int(d) % ndim for d in axis))


def _spread(g, x, axis):
    """A reduction's cotangent put back over the reduced axes of @x."""
    jnp = _jnp()
    shape = _shape(x)
    axes = _axes(axis, len(shape))
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    if _shape(g) != kept:
        g = jnp.reshape(g, kept)
    return jnp.broadcast_to(g, shape)


def _reduce_axis(a, kw):
    return kw.get("axis", a[1] if len(a) > 1 else None)


def _r_sum(g, a, kw, y):
    axis = _reduce_axis(a, kw)
    return [_spread(g, a[0], axis)]


def _r_mean(g, a, kw, y):
    axis = _reduce_axis(a, kw)
    shape = _shape(a[0])
    n = math.prod(shape[d] for d in _axes(axis, len(shape)))
    return [_spread(g, a[0], axis) / n]


def _r_extreme(g, a, kw, y):
    """max / min along axes: the cotangent shared by the elements equal to
    the result (JAX's chooser rule)."""
    jnp = _jnp()
    axis = _reduce_axis(a, kw)
    x = a[0]
    hit = jnp.where(jnp.equal(x, _spread(y, x, axis)), 1.0, 0.0)
    count = jnp.sum(hit, axis=_axes(axis, len(_shape(x))), keepdims=True)
    return [_spread(g, x, axis) * hit / count]


def _r_reshape(g, a, kw, y):
    return [_jnp().reshape(g, _shape(a[0]))]


def _r_astype(g, a, kw, y):
    return [_jnp().astype(g, _dtype(a[0]))]


def _r_transpose(g, a, kw, y):
    axes = a[1] if len(a) > 1 else kw.get("axes")
    if axes is None:
        return [_jnp().transpose(g)]
    inv = [0] * len(axes)
    for i, d in enumerate(axes):
        inv[int(d) % len(axes)] = i
    return [_jnp().transpose(g, tuple(inv))]


def _r_swapaxes(g, a, kw, y):
    return [_jnp().swapaxes(g, a[1], a[2])]


def _r_moveaxis(g, a, kw, y):
    return [_jnp().moveaxis(g, a[2], a[1])]


def _r_broadcast_to(g, a, kw, y):
    return [unbroadcast(g, a[0])]


def _r_concatenate(g, a, kw, y):
    axis = kw.get("axis", a[1] if len(a) > 1 else 0)
    parts, at = [], 0
    for x in a[0]:
        n = _shape(x)[axis]
        idx = [slice(None)] * len(_shape(x))
        idx[axis] = slice(at, at + n)
        parts.append(g[tuple(idx)])
        at += n
    return [parts]


def _r_stack(g, a, kw, y):
    axis = kw.get("axis", a[1] if len(a) > 1 else 0)
    out = []
    for i in range(len(a[0])):
        idx = [slice(None)] * len(_shape(g))
        idx[axis] = i
        out.append(g[tuple(idx)])
    return [out]


def _dims_of_dot(name, a, b):
    """jnp.dot / jnp.matmul of @a and @b as lax.dot_general's numbers."""
    ra, rb = len(_shape(a)), len(_shape(b))
    if ra == 0 or rb == 0:
        return None
    if name == "matmul" and ra >= 2 and rb >= 2:
        if ra != rb:
            raise TypeError("jax.vjp: jnp.matmul of ranks %d and %d (broadcast batch "
                            "dimensions) has no derivative rule here" % (ra, rb))
        batch = tuple(range(ra - 2))
        return ((ra - 1,), (rb - 2,)), (batch, batch)
    return ((ra - 1,), (max(rb - 2, 0),)), ((), ())


def _remaining(n, *removed):
    gone = {d for r in removed for d in r}
    return [d for d in range(n) if d not in gone]


def _dot_t_lhs(g, x, y, dims, swap_ans=False, pet=None):
    """lax.dot_general's cotangent for its lhs (JAX's transpose rule)."""
    lax = _lax()
    (xc, yc), (xb, yb) = dims
    xk = _remaining(len(_shape(x)), xc, xb)
    yk = _remaining(len(_shape(y)), yc, yb)
    nb = len(xb)
    if swap_ans:
        ans_y = list(range(nb, nb + len(yk)))
    else:
        ans_y = list(range(nb + len(xk), nb + len(xk) + len(yk)))
    ans_b = list(range(nb))
    r = lax.dot_general(g, y, ((tuple(ans_y), tuple(yk)), (tuple(ans_b), tuple(yb))),
                        preferred_element_type=pet)
    xc_by_y = [xc[i] for i in sorted(range(len(yc)), key=lambda i: yc[i])]
    order = list(xb) + xk + xc_by_y
    out_axes = sorted(range(len(order)), key=lambda i: order[i])
    if out_axes != list(range(len(order))):
        r = _jnp().transpose(r, tuple(out_axes))
    return r


def _dot_cts(g, x, y, dims):
    (xc, yc), (xb, yb) = dims
    gx = _dot_t_lhs(g, x, y, dims)
    gy = _dot_t_lhs(g, y, x, ((yc, xc), (yb, xb)), swap_ans=True)
    return [_cast_like(gx, x), _cast_like(gy, y)]


def _cast_like(g, x):
    return g if str(_dtype(g)) == str(_dtype(x)) else _jnp().astype(g, _dtype(x))


def _r_dot(name):
    def rule(g, a, kw, y):
        x0, x1 = a
        dims = _dims_of_dot(name, x0, x1)
        if dims is None:	# a scalar operand: a product
            return _r_mul(g, a, kw, y)
        return _dot_cts(g, x0, x1, dims)
    return rule


def _r_dot_general(g, a, kw, y):
    dn = kw.get("dimension_numbers", a[2] if len(a) > 2 else None)
    (xc, yc), (xb, yb) = dn
    dims = ((tuple(xc), tuple(yc)), (tuple(xb), tuple(yb)))
    return _dot_cts(g, a[0], a[1], dims) + [None] * (len(a) - 2)


def _r_einsum(g, a, kw, y):
    """Each operand's cotangent: the einsum of the output's cotangent with
    the other operands onto its indices; indices it alone has (summed out)
    are broadcast back."""
    jnp = _jnp()
    spec = a[0].replace(" ", "")
    ins, arrow, out = spec.partition("->")
    ins = ins.split(",")
    letters = "".join(ins)
    if "." in spec:
        raise TypeError("jax.vjp: jnp.einsum with an ellipsis has no derivative rule here")
    if not arrow:
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    cts = [None]
    for i, sub in enumerate(ins):
        others = [(s, x) for j, (s, x) in enumerate(zip(ins, a[1:])) if j != i]
        reach = set(out).union(*[set(s) for s, _ in others])
        have = "".join(c for c in sub if c in reach)
        eq = ",".join([out] + [s for s, _ in others]) + "->" + have
        r = jnp.einsum(eq, g, *[x for _, x in others])
        if have != sub:
            shape = _shape(a[1 + i])
            r = jnp.reshape(r, tuple(shape[k] if c in reach else 1 for k, c in enumerate(sub)))
            r = jnp.broadcast_to(r, shape)
        cts.append(_cast_like(r, a[1 + i]))
    return cts


def _r_identity(g, a, kw, y):
    return [g]


def _r_logistic(g, a, kw, y):
    return [g * y * (1.0 - y)]


def _r_erf(g, a, kw, y):
    return [g * (2.0 / math.sqrt(math.pi)) * _jnp().exp(-a[0] * a[0])]


_RULES = {
    "add": _r_add, "subtract": _r_sub, "multiply": _r_mul, "divide": _r_div,
    "true_divide": _r_div, "power": _r_pow, "maximum": _chooser(),
    "minimum": _chooser(), "where": _r_where, "clip": _r_clip,
    "negative": _elementwise(lambda x, y: -1.0), "square": _elementwise(lambda x, y: 2.0 * x),
    "sqrt": _elementwise(lambda x, y: 0.5 / y), "rsqrt": _elementwise(lambda x, y: -0.5 * y / x),
    "exp": _elementwise(lambda x, y: y), "exp2": _elementwise(lambda x, y: y * math.log(2.0)),
    "log": _elementwise(lambda x, y: 1.0 / x), "log1p": _elementwise(lambda x, y: 1.0 / (x + 1.0)),
    "expm1": _elementwise(lambda x, y: y + 1.0),
    "tanh": _elementwise(lambda x, y: 1.0 - y * y),
    "sin": _elementwise(lambda x, y: _jnp().cos(x)),
    "cos": _elementwise(lambda x, y: -_jnp().sin(x)),
    "tan": _elementwise(lambda x, y: 1.0 + y * y),
    "arctan": _elementwise(lambda x, y: 1.0 / (1.0 + x * x)),
    "sinh": _elementwise(lambda x, y: _jnp().cosh(x)),
    "cosh": _elementwise(lambda x, y: _jnp().sinh(x)),
    "abs": _elementwise(lambda x, y: _jnp().sign(x)),
    "sum": _r_sum, "mean": _r_mean, "max": _r_extreme, "min": _r_extreme,
    "amax": _r_extreme, "amin": _r_extreme,
    "reshape": _r_reshape, "ravel": _r_reshape, "squeeze": _r_reshape,
    "expand_dims": _r_reshape, "astype": _r_astype, "transpose": _r_transpose,
    "swapaxes": _r_swapaxes, "moveaxis": _r_moveaxis, "broadcast_to": _r_broadcast_to,
    "concatenate": _r_concatenate, "stack": _r_stack,
    "dot": _r_dot("dot"), "matmul": _r_dot("matmul"), "dot_general": _r_dot_general,
    "einsum": _r_einsum, "asarray": _r_identity, "array": _r_identity,
    "logistic": _r_logistic, "sigmoid": _r_logistic, "erf": _r_erf,
}

# of these the output carries no cotangent (piecewise constant, or a
# comparison, an index, a fresh array)
_NONDIFF = frozenset("""sign floor ceil round rint trunc equal not_equal less less_equal
greater greater_equal isnan isinf isfinite argmax argmin zeros_like ones_like full_like
empty_like zeros ones full arange iota logical_and logical_or logical_not bitwise_and
bitwise_or bitwise_xor invert left_shift right_shift floor_divide mod remainder
stop_gradient""".split())


def getitem(x, idx):
    """x[idx] of a Tracer."""
    tape = top_tape([x, idx])
    p = _unwrap(x, tape)
    out = p[_unwrap(idx, tape)]
    if not _is_float(_dtype(out)):
        return out
    return _record(tape, out, [x], lambda g: [(x, scatter_add(p, idx, g))])


def _basic_index(idx, shape):
    """x[idx]'s (start, stop) along each of x's dimensions and the shape of
    the result with the ints' dimensions kept (as 1) and new axes left out,
    for ints, unit-step slices, Ellipsis and None; None for other indices."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(i is Ellipsis for i in idx):
        at = idx.index(Ellipsis)
        fill = len(shape) - (len(idx) - 1 - sum(i is None for i in idx))
        idx = idx[:at] + (slice(None),) * fill + idx[at + 1:]
    ranges, d = [], 0
    for i in idx:
        if i is None:
            continue
        if d >= len(shape):
            return None
        n = shape[d]
        if isinstance(i, int) and not isinstance(i, bool):
            i = i % n
            ranges.append((i, i + 1))
        elif isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                return None
            ranges.append((start, max(start, stop)))
        else:
            return None
        d += 1
    ranges += [(0, n) for n in shape[d:]]
    return ranges


def scatter_add(x, idx, g):
    """zeros of @x's shape with @g added at @idx (x[idx]'s transpose): the
    cotangent padded with zeros where the index is basic (in a kernel too),
    else NumPy's add.at on the host."""
    from . import _trace
    jnp = _jnp()
    shape = _shape(x)
    ranges = _basic_index(idx, shape)
    if ranges is not None:
        g = jnp.reshape(g, tuple(b - a for a, b in ranges))
        if all(a == 0 and b == n for (a, b), n in zip(ranges, shape)):
            return g
        return jnp.pad(g, [(a, n - b) for (a, b), n in zip(ranges, shape)])
    tape = top_tape([g])
    if _trace._rec is not None or tape is not None:
        raise TypeError("jax.vjp: the cotangent of x[%r] (an index of arrays or strides) "
                        "is computed on the host only, once" % (idx,))
    import numpy as np
    z = np.zeros(shape, np.float32)
    np.add.at(z, idx, np.asarray(g, np.float32))
    return jnp.astype(jnp.asarray(z), _dtype(x))


def _r_pad(g, a, kw, y):
    if kw.get("mode", "constant") != "constant":
        raise TypeError("jax.vjp: jnp.pad of mode %r has no derivative rule here"
                        % kw.get("mode"))
    width = a[1] if len(a) > 1 else kw["pad_width"]
    shape = _shape(a[0])
    width = [width] * len(shape) if isinstance(width, int) else list(width)
    width = [(w, w) if isinstance(w, int) else tuple(w) for w in width]
    return [g[tuple(slice(lo, lo + n) for (lo, _), n in zip(width, shape))]]


def _r_var(g, a, kw, y):
    jnp = _jnp()
    x = a[0]
    axis = kw.get("axis", a[1] if len(a) > 1 else None)
    shape = _shape(x)
    n = math.prod(shape[d] for d in _axes(axis, len(shape))) - kw.get("ddof", 0)
    centred = x - jnp.mean(x, axis=axis, keepdims=True)
    return [_spread(g, x, axis) * centred * (2.0 / n)]


def _r_std(g, a, kw, y):
    return _r_var(g / (2.0 * y), a, kw, None)	# d sqrt(v) = dv / (2 sqrt(v))


_RULES.update(pad=_r_pad, var=_r_var, std=_r_std)


# --- the transformations -------------------------------------------------

def _zeros_like(x):
    return _jnp().zeros_like(x)


def _local(v):
    """In a kernel, @v bound to a local: a cotangent feeds several rules,
    and as an expression it would be written out in each."""
    from . import _trace
    if _trace._rec is not None and isinstance(v, _trace.Value) and \
            v.kind not in ("local", "text"):
        _trace.recorder().bind(v)
    return v


def _backward(tape, outs, cts):
    """The cotangents of the tape's Tracers, from @cts of @outs."""
    acc = {}
    for o, c in zip(outs, cts):
        if isinstance(o, Tracer) and o.tape is tape and c is not None:
            acc[id(o)] = c if id(o) not in acc else acc[id(o)] + c
    for outs, operands, rule in reversed(tape.nodes):
        gs = [_local(acc.pop(id(o), None)) for o in outs]
        if not operands or all(g is None for g in gs):
            continue
        for t, ct in rule(gs):
            if ct is None:
                continue
            acc[id(t)] = ct if id(t) not in acc else acc[id(t)] + ct
    return acc


def vjp(fun, *primals, has_aux=False):
    """jax.vjp: fun's outputs at @primals and the function from their
    cotangents to the primals'."""
    tape = _Tape()
    leaves, tree = _pytree.flatten(list(primals))
    ins = [Tracer(x, tape) for x in leaves]
    _open[0] += 1
    try:
        res = fun(*_pytree.unflatten(tree, ins))
    finally:
        _open[0] -= 1
    out, aux = (res[0], res[1]) if has_aux else (res, None)
    if has_aux:
        aux_leaves, aux_tree = _pytree.flatten(aux)
        aux = _pytree.unflatten(aux_tree, [_unwrap(a, tape) for a in aux_leaves])
    out_leaves, out_tree = _pytree.flatten(out)
    plain = [_unwrap(o, tape) for o in out_leaves]

    def vjp_fn(*ct):
        ct = ct[0] if len(ct) == 1 else ct
        ct_leaves, _ = _pytree.flatten(ct)
        if len(ct_leaves) != len(out_leaves):
            raise ValueError("jax.vjp: the cotangent has %d leaves, the output %d"
                             % (len(ct_leaves), len(out_leaves)))
        _open[0] += 1
        try:
            acc = _backward(tape, out_leaves, ct_leaves)
        finally:
            _open[0] -= 1
        got = []
        for t, x in zip(ins, leaves):
            g = acc.get(id(t))
            got.append(_zeros_like(x) if g is None else _cast_like(g, x))
        return tuple(_pytree.unflatten(tree, got))

    primal_out = _pytree.unflatten(out_tree, plain)
    return (primal_out, vjp_fn, aux) if has_aux else (primal_out, vjp_fn)


def _check_real(x, what):
    for leaf in _pytree.flatten(x)[0]:
        if not _is_float(_dtype(leaf)):
            raise TypeError("%s requires real- or complex-valued inputs (input dtype that "
                            "is a sub-dtype of np.inexact), but got %s" % (what, _dtype(leaf)))


def value_and_grad(fun, argnums=0, has_aux=False):
    """jax.value_and_grad: fun's scalar output and its gradient at @argnums."""
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)

    @functools.wraps(fun)
    def vg(*args, **kw):
        wrt = [args[i] for i in nums]
        _check_real(wrt, "grad")

        def part(*xs):
            a = list(args)
            for i, x in zip(nums, xs):
                a[i] = x
            return fun(*a, **kw)
        r = vjp(part, *wrt, has_aux=has_aux)
        out, fn = r[0], r[1]
        if _shape(out) != ():
            raise TypeError("grad requires scalar output; got a value of shape %s"
                            % (_shape(out),))
        g = fn(_jnp().ones_like(out))
        g = g if many else g[0]
        return ((out, r[2]), g) if has_aux else (out, g)
    return vg


def grad(fun, argnums=0, has_aux=False):
    """jax.grad: value_and_grad's gradient (with the aux if @has_aux)."""
    vg = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def g(*args, **kw):
        v, grads = vg(*args, **kw)
        return (grads, v[1]) if has_aux else grads
    return g


def jvp(fun, primals, tangents, has_aux=False):
    """jax.jvp: the product of fun's Jacobian at @primals with @tangents, as
    the transpose of its vjp (a vjp of the vjp, which is linear in the
    cotangent)."""
    r = vjp(fun, *primals, has_aux=has_aux)
    out, fn = r[0], r[1]
    out_leaves, out_tree = _pytree.flatten(out)
    zero_ct = _pytree.unflatten(out_tree, [_zeros_like(o) for o in out_leaves])
    _, back = vjp(lambda ct: fn(ct), zero_ct)
    t_out, = back(tuple(tangents))
    return (out, t_out, r[2]) if has_aux else (out, t_out)


def linearize(fun, *primals):
    """jax.linearize: fun at @primals and its jvp as a function of tangents."""
    out = fun(*primals)
    return out, lambda *t: jvp(fun, primals, t)[1]


def _positional(fun, args, kw):
    if not kw:
        return args
    bound = inspect.signature(fun).bind(*args, **kw)
    bound.apply_defaults()
    return tuple(bound.args)


class custom_vjp:
    """jax.custom_vjp: @fun with the derivative its defvjp gives. Called on
    Tracers it runs fwd on their primals and records bwd as the rule."""

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        nums = set(nondiff_argnums)
        if nondiff_argnames:
            names = list(inspect.signature(fun).parameters)
            nums |= {names.index(n) for n in nondiff_argnames}
        self.nondiff_argnums = tuple(sorted(nums))
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kw):
        args = _positional(self.fun, args, kw)
        tape = top_tape(args) if active() else None
        if tape is None:
            return self.fun(*args)
        if self.fwd is None:
            raise TypeError("jax.custom_vjp %s: differentiated before defvjp gave its "
                            "rule" % getattr(self.fun, "__name__", "?"))
        pargs = [_unwrap(a, tape) for a in args]
        out, res = self.fwd(*pargs)
        out_leaves, out_tree = _pytree.flatten(out)
        diff = [i for i in range(len(args)) if i not in self.nondiff_argnums]
        nondiff = [pargs[i] for i in self.nondiff_argnums]
        operands = [_mine(args[i], tape) for i in diff]
        outs = [Tracer(o, tape) for o in out_leaves]

        def back(gs):
            cts = [_zeros_like(o) if g is None else g for g, o in zip(gs, out_leaves)]
            got = self.bwd(*nondiff, res, _pytree.unflatten(out_tree, cts))
            if not isinstance(got, (tuple, list)) or len(got) != len(diff):
                raise TypeError("jax.custom_vjp %s: bwd returned %r; it returns a tuple "
                                "of one cotangent per differentiable argument (%d)"
                                % (getattr(self.fun, "__name__", "?"), type(got).__name__,
                                   len(diff)))
            pairs = []
            for ops, ct in zip(operands, got):
                if ops:
                    pairs.extend(zip(ops, _pytree.flatten(ct)[0]))
            return pairs
        tape.nodes.append((outs, [t for ops in operands for t in ops], back))
        return _pytree.unflatten(out_tree, outs)


class custom_jvp:
    """jax.custom_jvp: @fun, differentiated through its own body here (its
    jvp rule is kept but not used: reverse mode traces the body)."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros=False):
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        self.jvp = jvps

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

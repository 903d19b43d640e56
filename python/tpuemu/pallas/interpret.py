# SPDX-License-Identifier: MIT
"""pltpu.InterpretParams: JAX's TPU interpret mode's options, and what of
them holds on tpuemu, where an interpreted kernel still runs on the device.

- uninitialized_memory ("nan", the default, or "zero"): scratch buffers
  are filled at the grid's first step (the first core's: the sim has
  one), and every output block starts from its array in HBM, which holds
  the value (each output is aliased to an input filled with it, its
  blocks read back at each new visit, pl.Buffered(1, revisit=ANY)). NaN
  for floats, the type's maximum for integers, True for bool, as JAX's
  interpreter. Outputs given as pytrees other than a flat list, outputs
  of rank 5 or 6, outputs with a pipeline_mode of their own, and
  pl.run_scoped buffers and SMEM scratch of more than 64 elements are not
  filled.
- detect_races: the call runs in the device's debug mode, whose hazard
  checks are a dynamic race detector (a body op touching a region an async
  copy in flight writes, a copy over such a region, an output block written
  by two iterations of the parallel dimensions); a hazard sets
  races.races_found, is printed, and the call runs again without debug
  mode for its results (the device stops a job at its first hazard).
  With num_cores_or_threads=1 the parallel dimensions run as one core
  runs them, in order, so their blocks cannot race. In that run the
  padding of edge input blocks reads as debug mode's poison (NaN, an
  integer's minimum), where JAX pads with the uninitialised value.
- the grid (up to 65536 steps) is walked on the host first, the index
  maps called with Python ints: an output block revisited after the grid
  left it raises JAX's "Revisited block" error (not with
  pl.RevisitMode.ANY, which makes revisits work), a block wholly outside
  its array JAX's "Out-of-bounds block index" error; 'parallel'
  dimensions must come first.
- dma_execution_mode: validated; the device moves a copy's data when it
  starts ("eager") in both modes; with detect_races, a body op touching a
  copy's region before its wait is reported whichever mode is given.

Refused by name: random_seed and grid_point_recorder (the device runs
grid points in row-major order), out_of_bounds_reads="uninitialized",
skip_floating_point_ops. Taken without effect: buffer_bounds,
vector_clock_size, logging_mode; HBM in pl.run_scoped is refused whatever
allow_hbm_allocation_in_run_scoped says. pl.core_map and pl.kernel pass
theirs to their pallas_call (whose operands are refs: no output is
filled)."""
import contextlib
import copy
import dataclasses
import itertools
import sys
from typing import Any, Callable, Literal, Optional

import numpy as _np

_HAZARD = 9	# uapi/tpu_job.h: TPU_JOB_ERR_HAZARD
_WALK_STEPS = 1 << 16	# grids walked on the host up to this many steps


@dataclasses.dataclass(frozen=True, kw_only=True)
class InterpretParams:
    """pltpu.InterpretParams: JAX's fields and defaults (num_cores_per_device
    is older JAX's num_cores_or_threads)."""
    dma_execution_mode: Literal["eager", "on_wait"] = "on_wait"
    detect_races: bool = False
    out_of_bounds_reads: Literal["raise", "uninitialized"] = "raise"
    skip_floating_point_ops: bool = False
    uninitialized_memory: Literal["nan", "zero"] = "nan"
    random_seed: Optional[int] = None
    grid_point_recorder: Optional[Callable[..., Any]] = None
    num_cores_or_threads: int = 1
    allow_hbm_allocation_in_run_scoped: bool = False
    buffer_bounds: Literal["logical", "padded"] = "logical"
    vector_clock_size: Optional[int] = None
    logging_mode: Any = None

    def __post_init__(self):
        if self.num_cores_or_threads < 1:
            raise ValueError("Number of cores or threads must be at least 1, but got"
                             f" {self.num_cores_or_threads}.")
        if self.vector_clock_size is not None and self.vector_clock_size < 1:
            raise ValueError("Vector clock size must be at least 1, but got"
                             f" {self.vector_clock_size}.")
        for field, allowed in (("dma_execution_mode", ("eager", "on_wait")),
                               ("out_of_bounds_reads", ("raise", "uninitialized")),
                               ("uninitialized_memory", ("nan", "zero")),
                               ("buffer_bounds", ("logical", "padded"))):
            if getattr(self, field) not in allowed:
                raise ValueError("InterpretParams: %s must be one of %s, not %r"
                                 % (field, " or ".join(map(repr, allowed)),
                                    getattr(self, field)))

    @property
    def num_cores_per_device(self):
        return self.num_cores_or_threads


def TPUInterpretParams(*, num_cores_per_device=None, **kw):
    """Older JAX's name (mosaic_interpret.TPUInterpretParams), which took
    num_cores_per_device."""
    if num_cores_per_device is not None:
        kw["num_cores_or_threads"] = num_cores_per_device
    return InterpretParams(**kw)


class RaceDetectionState:
    """mosaic_interpret.races: made anew by each interpreted call."""

    def __init__(self):
        self.races_found = False


races = None
_INNER = type("_Inner", (), {"__repr__": lambda self: "interpret.INNER"})()
# (interpret=_INNER: call()'s own pallas_call, on the device with the flag)
_forced = [None]	# force_tpu_interpret_mode / set_tpu_interpret_mode's params


@contextlib.contextmanager
def force_tpu_interpret_mode(params=InterpretParams()):
    """Calls made under it run with interpret=params."""
    prev, _forced[0] = _forced[0], params
    try:
        yield
    finally:
        _forced[0] = prev


def set_tpu_interpret_mode(params=InterpretParams()):
    _forced[0] = params


def reset_tpu_interpret_mode_state():
    """JAX's interpreter keeps its simulated memory after an exception; the
    device keeps nothing, so only the race state goes."""
    global races
    races = None


def params_of(interpret):
    """The InterpretParams a call runs with, or None (plain interpret=True or
    False: the flag only). force_tpu_interpret_mode's override a call's."""
    if interpret is _INNER:
        return None
    if _forced[0] is not None:	# as JAX's, the context's params win
        return _forced[0]
    if isinstance(interpret, InterpretParams):
        return interpret
    return None


def uninitialized_value(dtype, mode):
    """What JAX's interpreter fills uninitialised memory of @dtype with."""
    dt = _np.dtype(getattr(dtype, "np", dtype)) if not _is_bf16(dtype) else None
    if mode == "zero":
        return 0
    if dt is None or _np.issubdtype(dt, _np.floating):
        return _np.nan
    if dt == _np.bool_:
        return True
    return _np.iinfo(dt).max


def _is_bf16(dtype):
    return "bfloat16" in str(getattr(dtype, "name", dtype))


def _refuse(params):
    if params.random_seed is not None or params.grid_point_recorder is not None:
        raise NotImplementedError(
            "InterpretParams(random_seed=, grid_point_recorder=): the device runs grid "
            "points in row-major order and does not report them")
    if params.out_of_bounds_reads != "raise":
        raise NotImplementedError(
            "InterpretParams(out_of_bounds_reads='uninitialized'): out-of-bounds blocks, "
            "windows and SMEM reads are refused or read as the hardware reads them")
    if params.skip_floating_point_ops:
        raise NotImplementedError("InterpretParams(skip_floating_point_ops=True)")


def check_semantics(compiler_params, rank):
    """JAX's interpreter runs the parallel dimensions outermost."""
    ds = getattr(compiler_params, "dimension_semantics", None) or ()
    par = [d == "parallel" for d in ds][:rank]
    for a, b in zip(par[:-1], par[1:]):
        if b and not a:
            raise ValueError("Dimensions with parallel semantics must form a prefix of the grid.")


def _int_tuple(x):
    x = x if isinstance(x, tuple) else (x,)
    return tuple(int(v) for v in x)


def walk_grid(grid, blocks, outputs):
    """Row-major over @grid: each of @blocks ((name, kind, array shape,
    block shape, index map)), the block index each step; a block wholly
    outside the array raises JAX's IndexError, an output block (@outputs:
    block number -> output number) met again after the grid left it JAX's
    RuntimeError. Maps that do not take Python ints (prefetch refs, pl.ds)
    are skipped: the device checks them."""
    done = [dict() for _ in blocks]	# finished visits: index -> (first, last step)
    cur = [None] * len(blocks)		# (index, first step, last step)
    live = [True] * len(blocks)
    for step in itertools.product(*(range(n) for n in grid)):
        for b, (name, kind, shape, bshape, imap) in enumerate(blocks):
            if not live[b]:
                continue
            try:
                idx = _int_tuple(imap(*step))
            except Exception:
                live[b] = False
                continue
            if len(idx) != len(shape) or len(bshape) != len(shape):
                live[b] = False
                continue
            if any(i < 0 or i * n >= s for i, n, s in zip(idx, bshape, shape)):
                span = ", ".join("%d:%d" % (i * n, (i + 1) * n) for i, n in zip(idx, bshape))
                raise IndexError(
                    'Out-of-bounds block index %s for %s "%s" in iteration %s: %s [%s] but '
                    '%s has shape %s.' % (idx, kind, name, step,
                                          "reading" if kind == "input" else "writing",
                                          span, kind, tuple(shape)))
            if b not in outputs:
                continue
            if cur[b] is not None and cur[b][0] == idx:
                cur[b] = (idx, cur[b][1], step)
                continue
            if cur[b] is not None:
                done[b][cur[b][0]] = cur[b][1:]
            if idx in done[b]:
                first, last = done[b][idx]
                raise RuntimeError(
                    "Revisited block %s of output %d in iteration %s. The block was "
                    "previously visited in iterations %s through %s ."
                    % (idx, outputs[b], step, first, last))
            cur[b] = (idx, step, step)


def run_detecting_races(params, go):
    """go(debug, arbitrary) -> results: with detect_races, first in the
    device's debug mode (@arbitrary: the parallel dimensions as one core
    runs them), a hazard recorded in races and the call made again
    without it."""
    global races
    races = RaceDetectionState()
    if not params.detect_races:
        return go(False, False)
    from .._lib import TpurtError
    try:
        return go(True, params.num_cores_or_threads == 1)
    except TpurtError as e:
        if getattr(e, "job_error", None) != _HAZARD:
            raise
        races.races_found = True
        print("RACE DETECTED: %s" % e, file=sys.stderr)
    return go(False, False)


def replace(spec, **kw):
    s = copy.copy(spec)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def _is_array(a):
    from .._state import HostRef
    return hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(
        a, (HostRef, list, tuple, dict)) and not hasattr(a, "_pallas_key")


def _block_shape(spec, shape):
    """A spec's block shape as ints (squeezed: 1), or None where the walk
    cannot follow it (pl.Element, pl.Unblocked, pl.BoundedSlice, ANY, no
    index map)."""
    from . import Blocked, Squeezed
    if spec is None or getattr(spec, "index_map", None) is None:
        return None
    if getattr(spec, "indexing_mode", None) is not None and \
            not isinstance(spec.indexing_mode, Blocked):
        return None
    if getattr(getattr(spec, "memory_space", None), "_space", spec.memory_space) == "any":
        return None
    bs = spec.block_shape if spec.block_shape is not None else tuple(shape)
    out = []
    for n in bs:
        if n is None or isinstance(n, Squeezed):
            out.append(1)
        elif isinstance(n, (int, _np.integer)):
            out.append(int(n))
        else:
            return None
    return tuple(out)


statements = [None]	# the last call's statements (pallas_call's run.statements)


def call(pallas_call, kernel, out_shape, kw, args, params):
    """pallas_call(kernel, out_shape, **kw)(*args) under @params."""
    import inspect
    from .. import _fold, _pytree
    from .._trace import as_dtype
    from . import BlockSpec, Buffered, GridSpec, RevisitMode, ANY, when, program_id
    from .. import numpy as jnp
    from .tpu import PrefetchScalarGridSpec, _Scratch
    gs = kw.get("grid_spec")
    if gs is None:
        gs = GridSpec(kw.get("grid", ()), kw.get("in_specs"), kw.get("out_specs"),
                      kw.get("scratch_shapes", ()))
    grid = tuple(int(n) for n in (gs.grid or ()))
    nsp = gs.num_scalar_prefetch
    check_semantics(kw.get("compiler_params"), len(grid))
    _refuse(params)
    inputs = list(args[nsp:])
    flat_in = all(_is_array(a) for a in inputs)
    in_specs = gs.in_specs
    if in_specs is not None and not isinstance(in_specs, (list, tuple)):
        in_specs = [in_specs]
    single = not isinstance(out_shape, (list, tuple))
    outs = [out_shape] if single else list(out_shape) if out_shape is not None else []
    out_specs = gs.out_specs
    if out_specs is not None and not isinstance(out_specs, (list, tuple)):
        out_specs = [out_specs] if single else None
    # (semaphore and Pallas-key outputs are not memory JAX fills)
    flat_out = bool(outs) and all(hasattr(o, "shape") and hasattr(o, "dtype") and
                                  not hasattr(o, "_space_code") and
                                  "Key" not in type(o.dtype).__name__ and
                                  "Sem" not in type(o.dtype).__name__ for o in outs) and \
        (out_specs is None or len(out_specs) == len(outs))
    if flat_out and out_specs is not None and not all(
            s is None or isinstance(s, BlockSpec) for s in out_specs):
        flat_out = False

    # the grid, walked on the host
    blocks, out_blocks = [], {}
    if flat_in and in_specs is not None and len(in_specs) == len(inputs):
        for k, (a, s) in enumerate(zip(inputs, in_specs)):
            bs = _block_shape(s, a.shape)
            if bs is not None:
                blocks.append(("input%d" % k, "input", tuple(a.shape), bs, s.index_map))
    if flat_out and out_specs is not None:
        for k, (o, s) in enumerate(zip(outs, out_specs)):
            bs = _block_shape(s, o.shape)
            mode = getattr(s, "pipeline_mode", None)
            if bs is not None and getattr(mode, "revisit", None) != RevisitMode.ANY:
                # (pl.RevisitMode.ANY: revisits are what it is for)
                out_blocks[len(blocks)] = k
                blocks.append(("output%d" % k, "output", tuple(o.shape), bs, s.index_map))
    if blocks and grid and _np.prod(grid) <= _WALK_STEPS:
        from . import _grids
        _grids.append(grid)	# pl.num_programs in a map: the grid's extents
        try:
            walk_grid(grid, blocks, out_blocks)
        finally:
            _grids.pop()

    # outputs start from HBM arrays of the uninitialised value (a kernel
    # whose parameters do not match the refs is left to pallas_call's error)
    sig = list(inspect.signature(kernel).parameters.values())
    pos = [p for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nscratch = len(gs.scratch_shapes)
    arity_ok = len(pos) == len(sig) == len(args) + len(outs) + nscratch
    aliases = dict(kw.get("input_output_aliases") or {})
    extra, new_out_specs = [], None
    if flat_in and flat_out and arity_ok and (in_specs is None or len(in_specs) == len(inputs)):
        nleaves = len(_pytree.flatten(tuple(args))[0])
        new_out_specs = list(out_specs) if out_specs is not None else [None] * len(outs)
        aliased = set(aliases.values())
        for j, o in enumerate(outs):
            # (a folded rank-5 or 6 output's blocks and an ANY input fold apart)
            if j in aliased or len(o.shape) > _fold.DEVICE_RANK:
                continue
            aliases[nleaves + len(extra)] = j
            extra.append(jnp.full(tuple(o.shape), uninitialized_value(
                o.dtype, params.uninitialized_memory), o.dtype))
            s = new_out_specs[j]
            space = getattr(getattr(s, "memory_space", None), "_space",
                            getattr(s, "memory_space", None))
            if getattr(s, "pipeline_mode", None) is not None:
                pass	# the user's buffering (RevisitMode.ANY reads back anyway)
            elif space == "smem":
                new_out_specs[j] = replace(s, _revisit_any=True)
            elif space != "any":
                mode = Buffered(1, revisit=RevisitMode.ANY)
                new_out_specs[j] = replace(s, pipeline_mode=mode) if s is not None else \
                    BlockSpec(pipeline_mode=mode)
    if not extra:
        new_out_specs = gs.out_specs
    elif single:
        new_out_specs = new_out_specs[0]
    new_in_specs = gs.in_specs
    if extra:
        base = list(in_specs) if in_specs is not None else [None] * len(inputs)
        new_in_specs = base + [BlockSpec(memory_space=ANY)] * len(extra)

    # scratch filled at the grid's first step (one core's: the sim has one)
    scratch = gs.scratch_shapes
    fills = [] if isinstance(scratch, dict) else [
        (k, s) for k, s in enumerate(scratch) if isinstance(s, _Scratch) and
        s._space_code in (0, 1) and not hasattr(s, "_key_batch")]
    na = nsp + len(inputs)

    def body(*refs):
        refs = list(refs)
        del refs[na:na + len(extra)]
        if fills:
            first = None
            for d in range(len(grid)):
                c = program_id(d) == 0
                first = c if first is None else first & c
            nscr = len(scratch)

            def fill():
                for k, s in fills:
                    r = refs[len(refs) - nscr + k]
                    dt = as_dtype(s.dtype)
                    v = uninitialized_value(dt, params.uninitialized_memory)
                    if s._space_code == 0:
                        r[...] = jnp.full(s.shape, v, dt)
                    elif int(_np.prod(s.shape)) <= 64:	# SMEM: element stores
                        for i in _np.ndindex(*s.shape):
                            r[i] = dt(v)
            if first is None:
                fill()
            else:
                when(first)(fill)
        return kernel(*refs)
    body.__wrapped__ = kernel	# errors name the kernel (pallas._fn_where)
    if extra:
        names = [p.name for p in pos]
        names[na:na] = ["_uninitialized_%d" % k for k in range(len(extra))]
        body.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    body.__name__ = getattr(kernel, "__name__", "kernel")

    new_gs = PrefetchScalarGridSpec(nsp, gs.grid, new_in_specs, new_out_specs, scratch) \
        if nsp else GridSpec(gs.grid, new_in_specs, new_out_specs, scratch)
    inner = dict(kw, grid_spec=new_gs, input_output_aliases=aliases or None)
    for k in ("grid", "in_specs", "out_specs", "scratch_shapes"):
        inner.pop(k, None)

    def go(debug, arbitrary):
        kw2 = dict(inner, interpret=_INNER, debug=debug or kw.get("debug", False))
        cp = kw2.get("compiler_params")
        if arbitrary and getattr(cp, "dimension_semantics", None):
            kw2["compiler_params"] = replace(cp, dimension_semantics=tuple(
                "arbitrary" for _ in cp.dimension_semantics))
        run = pallas_call(body, out_shape, **kw2)
        try:
            return run(*args, *extra)
        finally:
            statements[0] = run.statements
    return run_detecting_races(params, go)

# SPDX-License-Identifier: MIT
"""pl.kernel over a pltpu.TensorCoreMesh, as the Pallas TPU quickstart writes
kernels: the body runs once on each TensorCore of the device, its inputs and
outputs stay in HBM (pl.ANY: the body moves data with pltpu.sync_copy,
async copies or pltpu.emit_pipeline), its scratch comes from scratch_types,
and jax.lax.axis_index(axis_name) tells a core which it is.

It is a pallas_call with a grid of one parallel dimension, one step per
core: the device splits a parallel dimension across its cores, so each core
runs its own step."""
import inspect

from . import BlockSpec, ANY, pallas_call
from .._trace import CapturedConstantError, trace_error
from ._cost_estimate import check_cost_estimate

# The meshes of the kernels being traced, innermost last: (axis name, cores).
_mesh_axes = []


def _mesh_axis(name, fn):
    for axis, cores in reversed(_mesh_axes):
        if axis == name:
            return cores
    known = ", ".join(repr(a) for a, _ in _mesh_axes) or "none"
    raise trace_error("%s(%r): no mesh axis of that name (the mesh axes here: %s)"
                      % (fn, name, known))


def axis_index(axis_name):
    """jax.lax.axis_index inside a pl.kernel: the TensorCore running it."""
    _mesh_axis(axis_name, "jax.lax.axis_index")
    # the kernel's grid index itself: inside an emit_pipeline body
    # pl.program_id(0) is the pipeline's step
    from .._trace import scalar, int32
    return scalar("pl.program_id(0)", int32)


def axis_size(axis_name):
    """jax.lax.axis_size inside a pl.kernel: the mesh's TensorCores."""
    return _mesh_axis(axis_name, "jax.lax.axis_size")


def _flatten(tree):
    """The leaves of nested tuples and lists, and a function that rebuilds
    the same structure from as many new leaves."""
    if isinstance(tree, (list, tuple)):
        parts = [_flatten(t) for t in tree]
        leaves = [x for ls, _ in parts for x in ls]

        def build(new):
            out, at = [], 0
            for ls, b in parts:
                out.append(b(new[at:at + len(ls)]))
                at += len(ls)
            return type(tree)(out)
        return leaves, build
    return [tree], lambda new: new[0]


def _scratch(scratch_types):
    """(names or None, types): a dict's names are keyword arguments."""
    if isinstance(scratch_types, dict):
        return list(scratch_types), list(scratch_types.values())
    if isinstance(scratch_types, (list, tuple)):
        return None, list(scratch_types)
    return None, [scratch_types]


def _space_of(o):
    """An output type's memory space: pltpu.VMEM(...)'s, SMEM's, else HBM."""
    from .tpu import SMEM, VMEM
    return {0: VMEM, 1: SMEM}.get(getattr(o, "_space_code", None), ANY)


def _compiler_params(params):
    from .tpu import CompilerParams
    limit = getattr(params, "vmem_limit_bytes", None) if params is not None else None
    effects = getattr(params, "has_side_effects", False) if params is not None else False
    return CompilerParams(dimension_semantics=("parallel",), vmem_limit_bytes=limit,
                          has_side_effects=effects)


def kernel(body=None, out_type=None, *, mesh, scratch_types=None, compiler_params=None,
           out_shape=None, scratch_shapes=None, interpret=False, name=None,
           cost_estimate=None, debug=False, metadata=None):
    """pl.kernel(body, out_type=..., mesh=pltpu.TensorCoreMesh(...),
    scratch_types=...): a function of NumPy arrays giving the outputs.
    Without @body, a decorator. The body takes the inputs' refs, then the
    outputs', then the scratch refs (by keyword if scratch_types is a
    dict); an argument or output given as a tuple or list reaches it as
    the same structure of refs. out_shape and scratch_shapes are older
    JAX's names of out_type and scratch_types."""
    check_cost_estimate(cost_estimate, "pl.kernel")
    out_type = out_shape if out_type is None else out_type
    scratch_types = scratch_shapes if scratch_types is None else scratch_types
    if body is None:
        return lambda b: kernel(b, out_type, mesh=mesh, scratch_types=scratch_types,
                                compiler_params=compiler_params, name=name)
    axis = getattr(mesh, "axis_name", None)
    cores = getattr(mesh, "num_cores", None)
    if axis is None or cores is None:
        raise TypeError("pl.kernel: mesh must be a pltpu.TensorCoreMesh, not %r" % (mesh,))
    # as JAX's: each element of a tuple or list of outputs is a parameter;
    # none (out_type None: a kernel updating jax.new_ref refs) gives None
    unwrap = not isinstance(out_type, (tuple, list))
    out_parts = [] if out_type is None else [out_type] if unwrap else list(out_type)
    outs, build_outs = _flatten(out_parts)
    scratch_names, scratch = _scratch(() if scratch_types is None else scratch_types)

    def call(*tree):
        args, build_args = _flatten(list(tree))
        nio = len(tree) + len(out_parts)
        # the body's parameters: one per argument (a tree of refs), the
        # outputs (one, or a tree), the scratch refs
        params = [p.name for p in inspect.signature(body).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(params) < nio:
            params += ["ref_%d" % k for k in range(len(params), nio)]
        if scratch_names is None and len(params) != nio + len(scratch):
            raise TypeError("pl.kernel: %s takes %d refs, the call gives %d inputs, "
                            "the outputs and %d scratch refs"
                            % (getattr(body, "__name__", "the body"), len(params),
                               len(tree), len(scratch)))

        def leaf_names(param, n):
            return [param] if n == 1 else ["%s_%d" % (param, k) for k in range(n)]
        names = [x for p, t in zip(params, list(tree) + out_parts)
                 for x in leaf_names(p, len(_flatten(t)[0]))]
        names += scratch_names or params[nio:]
        nflat = len(args) + len(outs)

        def traced(*refs):
            ins = build_args(refs[:len(args)]) + build_outs(refs[len(args):nflat])
            _mesh_axes.append((axis, cores))
            try:
                if scratch_names is None:
                    body(*ins, *refs[nflat:])
                else:
                    body(*ins, **dict(zip(scratch_names, refs[nflat:])))
            except CapturedConstantError as e:
                # JAX's words for a kernel on a mesh (it has no in_specs)
                raise CapturedConstantError(
                    str(e).replace("in the pallas_call", "of pl.kernel").replace(
                        "; pass it as an input (with a BlockSpec) instead",
                        ". You can only close over scalars and Refs: pass it as an "
                        "input, or close over a jax.new_ref of it")) from None
            finally:
                _mesh_axes.pop()
        traced.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
        traced.__name__ = name or getattr(body, "__name__", "kernel")
        traced._pl_kernel = True	# it may close over VMEM refs (pallas_call's may not)
        hbm = BlockSpec(memory_space=ANY)
        # an output typed pltpu.VMEM(...) / SMEM(...) is a whole block there
        ospecs = [BlockSpec(memory_space=_space_of(o)) for o in outs]
        run = pallas_call(traced, out_shape=list(outs), grid=(cores,),
                          in_specs=[hbm] * len(args), out_specs=ospecs,
                          scratch_shapes=scratch,
                          compiler_params=_compiler_params(compiler_params),
                          interpret=interpret)
        out = build_outs(list(run(*args)))
        call.statements = run.statements
        if out_type is None:
            return None
        return out[0] if unwrap else type(out_type)(out)
    call.statements = None
    return call


def core_map(mesh, *, compiler_params=None, interpret=False, debug=False, name=None,
             cost_estimate=None, metadata=None):
    """pl.core_map(mesh): a decorator that runs its body (no arguments) at
    once on each core of @mesh, as JAX's: the body reaches memory through
    refs it closes over (jax.new_ref, pl.run_state's), which are the
    job's operands; it is a pl.kernel with no outputs."""
    check_cost_estimate(cost_estimate, "pl.core_map")
    def run(body):
        def core_body():
            body()
        core_body.__name__ = getattr(body, "__name__", "core_map")
        kernel(core_body, None, mesh=mesh, compiler_params=compiler_params, name=name,
               interpret=interpret)()
    return run

# SPDX-License-Identifier: MIT
"""shard_map (jax.shard_map, jax.experimental.shard_map.shard_map) over a
pltpu.TensorCoreMesh, as Pallas's "shmallas" uses it: a function of no
arguments, no outputs, run once on each TensorCore of the mesh, its refs
closed over (pl.run_state's): pl.core_map(mesh)(f). tpuemu runs one
device, so a mesh of devices (jax.sharding.Mesh) has nothing to map."""


def shard_map(f, mesh=None, in_specs=(), out_specs=None, check_rep=True, *, check_vma=None,
              axis_names=None, **_kw):
    del check_rep, check_vma, axis_names	# replication checks: one device, none to check
    from .pallas import core_map
    from .pallas.tpu import TensorCoreMesh
    if not isinstance(mesh, TensorCoreMesh):
        raise NotImplementedError("shard_map over %r: tpuemu maps over a "
                                  "pltpu.create_tensorcore_mesh mesh only (one device)"
                                  % (mesh,))
    if in_specs not in ((), None, []) or out_specs is not None:
        raise NotImplementedError("shard_map over a TensorCoreMesh: a kernel body of no "
                                  "arguments and no outputs (in_specs=(), out_specs=None), "
                                  "its refs closed over, as pl.core_map's")

    def mapped(*args):
        if args:
            raise TypeError("shard_map over a TensorCoreMesh: the function takes no "
                            "arguments (its refs are closed over)")
        core_map(mesh)(f)
    return mapped

# SPDX-License-Identifier: MIT
"""jax.config: the options tpuemu has, read as attributes
(jax.config.jax_pallas_poison_buffers) and set with update(name, value).
Each one here changes what runs; an option tpuemu has no meaning for is
refused by name, as JAX refuses an unknown one, rather than taken and
ignored."""
import contextlib


def _bool(name, value):
    if not isinstance(value, bool):
        raise TypeError("jax.config.update(%r, %r): a bool" % (name, value))
    return value


def _no_x64(name, value):
    if _bool(name, value):
        raise NotImplementedError("jax.config.update('jax_enable_x64', True): tpuemu's device "
                                  "has no 64-bit types (float32, int32 and narrower)")
    return value


def _standard_promotion(name, value):
    if value != "standard":
        raise NotImplementedError("jax.config.update('jax_numpy_dtype_promotion', %r): "
                                  "tpuemu promotes as jnp's standard mode only" % (value,))
    return value


# name -> (default, check): what each option does is said where it is read
_OPTIONS = {
    # pallas_call runs in the device's debug mode: scratch, first visits of
    # output blocks and edge padding poisoned (NaN, the integers' minimum,
    # true), as JAX's poisoned buffers; hazards are reported too
    "jax_pallas_poison_buffers": (False, _bool),
    "jax_enable_x64": (False, _no_x64),
    # pl.debug_check's conditions are checked on the device, a failure
    # raised when the call returns (pallas/_checkify.py); off, no-ops
    "jax_pallas_enable_debug_checks": (False, _bool),
    # the kernels' and jnp's promotions are the standard lattice's
    "jax_numpy_dtype_promotion": ("standard", _standard_promotion),
}


class Config:
    def __init__(self):
        object.__setattr__(self, "values", {n: d for n, (d, _) in _OPTIONS.items()})

    def _known(self, name):
        if name not in _OPTIONS:
            raise AttributeError("Unrecognized config option: %s (tpuemu has %s)"
                                 % (name, ", ".join(sorted(_OPTIONS))))

    def update(self, name, value):
        self._known(name)
        self.values[name] = _OPTIONS[name][1](name, value)

    def read(self, name):
        self._known(name)
        return self.values[name]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.read(name)

    def __setattr__(self, name, value):
        raise AttributeError("jax.config.%s: set options with jax.config.update" % name)

    @contextlib.contextmanager
    def option(self, name, value):
        """The option set to @value inside the block (jtu.with_config)."""
        old = self.read(name)
        self.update(name, value)
        try:
            yield
        finally:
            self.values[name] = old


config = Config()

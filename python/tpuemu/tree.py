# SPDX-License-Identifier: MIT
"""jax.tree: the tree_util functions under their short names."""
from .tree_util import (tree_flatten as flatten, tree_leaves as leaves,  # noqa: F401
                        tree_map as map, tree_structure as structure,
                        tree_unflatten as unflatten)

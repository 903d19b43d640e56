# SPDX-License-Identifier: MIT
"""jax.tree_util: pytrees (tuples, lists, dicts, namedtuples, None and the
registered classes; _pytree has the rules) on the host."""
from . import _pytree


def tree_flatten(tree):
    """(leaves in tree order, treedef)."""
    return _pytree.flatten(tree)


def tree_unflatten(treedef, leaves):
    return _pytree.unflatten(treedef, list(leaves))


def tree_leaves(tree):
    return _pytree.flatten(tree)[0]


def tree_structure(tree):
    return _pytree.flatten(tree)[1]


def tree_map(f, tree, *rest):
    """f of the leaves of @tree (and the leaves at the same places of each
    of @rest, which must have its structure), in the same structure."""
    leaves, treedef = _pytree.flatten(tree)
    others = []
    for n, r in enumerate(rest):
        r_leaves, r_def = _pytree.flatten(r)
        if r_def != treedef:
            raise ValueError("tree_map: argument %d's tree %r does not match the first's %r"
                             % (n + 1, r_def, treedef))
        others.append(r_leaves)
    return _pytree.unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """flatten_func(x) -> (children, aux_data); unflatten_func(aux_data,
    children) -> x."""
    _pytree.register_node(nodetype, flatten_func, unflatten_func)


def register_pytree_node_class(cls):
    """Class decorator: cls.tree_flatten() and cls.tree_unflatten(aux, children)."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls

# SPDX-License-Identifier: MIT
"""Pytrees as JAX's tree_util has them, for pallas_call's boundary: tuples,
lists, dicts (keys in sorted order), namedtuples and the classes
register_node() was given are nodes, None is an empty node, anything else
is a leaf. flatten() gives the leaves in tree order and a TreeDef that
unflatten() rebuilds the same structure from."""


class TreeDef:
    """kind: "leaf", "none", "tuple", "list", "dict", "namedtuple" or
    "custom" (a registered class); keys: a dict's sorted keys, a custom
    node's auxiliary data; children: the subtrees' TreeDefs."""

    def __init__(self, kind, children=(), keys=None, cls=None):
        self.kind = kind
        self.children = tuple(children)
        self.keys = keys
        self.cls = cls
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return isinstance(other, TreeDef) and self.kind == other.kind and \
            self.keys == other.keys and self.cls is other.cls and \
            self.children == other.children

    def __hash__(self):
        return hash((self.kind, self.children))

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        parts = [repr(c) for c in self.children]
        if self.kind == "dict":
            return "{%s}" % ", ".join("%r: %s" % (k, p) for k, p in zip(self.keys, parts))
        if self.kind == "list":
            return "[%s]" % ", ".join(parts)
        if self.kind in ("namedtuple", "custom"):
            return "%s(%s)" % (self.cls.__name__, ", ".join(parts))
        return "(%s%s)" % (", ".join(parts), "," if len(parts) == 1 else "")


# class -> (flatten(x) -> (children, aux), unflatten(aux, children) -> x)
_registry = {}


def register_node(cls, flatten_fn, unflatten_fn):
    """Make instances of @cls pytree nodes, as tree_util.register_pytree_node."""
    if not isinstance(cls, type):
        raise TypeError("register_pytree_node: %r is not a class" % (cls,))
    if cls in _registry:
        raise ValueError("register_pytree_node: %s is already registered" % cls.__name__)
    _registry[cls] = (flatten_fn, unflatten_fn)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def children(tree):
    """(kind, keys, cls, subtrees) of a node, None for a leaf."""
    if tree is None:
        return "none", None, None, []
    if type(tree) in _registry:
        subs, aux = _registry[type(tree)][0](tree)
        return "custom", aux, type(tree), list(subs)
    if _is_namedtuple(tree):
        return "namedtuple", None, type(tree), list(tree)
    if isinstance(tree, tuple):
        return "tuple", None, None, list(tree)
    if isinstance(tree, list):
        return "list", None, None, list(tree)
    if isinstance(tree, dict):
        try:
            keys = sorted(tree)
        except TypeError:
            raise TypeError("a pytree dict's keys must be sortable, not %r" % list(tree))
        return "dict", tuple(keys), None, [tree[k] for k in keys]
    return None


def flatten(tree):
    """(leaves in tree order, TreeDef)."""
    leaves = []

    def walk(t):
        node = children(t)
        if node is None:
            leaves.append(t)
            return TreeDef("leaf")
        kind, keys, cls, subs = node
        return TreeDef(kind, [walk(s) for s in subs], keys, cls)
    return leaves, walk(tree)


def unflatten(treedef, leaves):
    """The tree of @treedef's structure holding @leaves in order."""
    it = iter(leaves)

    def build(td):
        if td.kind == "leaf":
            return next(it)
        if td.kind == "none":
            return None
        subs = [build(c) for c in td.children]
        if td.kind == "dict":
            return dict(zip(td.keys, subs))
        if td.kind == "list":
            return subs
        if td.kind == "namedtuple":
            return td.cls(*subs)
        if td.kind == "custom":
            return _registry[td.cls][1](td.keys, subs)
        return tuple(subs)
    out = build(treedef)
    if next(it, _END) is not _END:
        raise ValueError("unflatten: more leaves than the tree's %d" % treedef.num_leaves)
    return out


_END = object()


def leaf_paths(treedef, prefix=""):
    """One path a leaf, in tree order: "[1]['w']", as JAX's keystr prints them."""
    if treedef.kind == "leaf":
        return [prefix]
    out = []
    for n, c in enumerate(treedef.children):
        key = "[%r]" % (treedef.keys[n],) if treedef.kind == "dict" else "[%d]" % n
        out += leaf_paths(c, prefix + key)
    return out


def match(spec, treedef, what, path=""):
    """The flat specs for the leaves of @treedef, @spec mirroring its
    structure (a tuple and a list match each other). None stands for the
    default spec of every leaf under it, as an omitted in_specs does.
    A mismatch raises ValueError naming the first place it differs."""
    if spec is None:
        return [None] * treedef.num_leaves
    node = children(spec)
    if treedef.kind == "leaf":
        if node is not None:
            raise ValueError("%s%s: a %s of specs where the operand tree has one array; "
                             "the specs' tree must mirror the operands' (%r)"
                             % (what, path, node[0], treedef))
        return [spec]
    if treedef.kind == "none":
        if node is not None and node[3]:
            raise ValueError("%s%s: specs for None (an empty operand tree)" % (what, path))
        return []
    if node is None:
        raise ValueError("%s%s: one spec (%r) where the operand tree is %r; give a spec "
                         "for each array, in the same structure"
                         % (what, path, spec, treedef))
    kind, keys, _, subs = node
    seq = ("tuple", "list", "namedtuple")
    if (kind in seq) != (treedef.kind in seq) or keys != treedef.keys or \
            len(subs) != len(treedef.children):
        raise ValueError("%s%s: the specs' tree %r does not match the operands' tree %r"
                         % (what, path, flatten(spec)[1], treedef))
    out = []
    for n, (s, c) in enumerate(zip(subs, treedef.children)):
        key = "[%r]" % (keys[n],) if kind == "dict" else "[%d]" % n
        out += match(s, c, what, path + key)
    return out

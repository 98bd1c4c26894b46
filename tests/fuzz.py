"""Hypothesis strategies the fuzz tests share: any JSON value, and mutations of a valid JSON
document (a value replaced or a key deleted somewhere in its tree), so that most examples get
past the first check and reach the code behind it."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, 1, -1, 2**63, 2**64, 10**30])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _like(node: Any) -> st.SearchStrategy:
    """Values of the same JSON type as `node` (most pass the type checks and reach the code
    that uses them: zero, negative, huge, empty, longer, shorter)."""
    if isinstance(node, bool):
        return st.booleans()
    if isinstance(node, int):
        return st.integers(-3, 3) | st.integers(-(10**12), 10**12)
    if isinstance(node, float):
        return st.floats(-1e12, 1e12) | st.sampled_from([0.0, -0.0, 1e-300])
    if isinstance(node, str):
        return st.text(max_size=6) | st.just(node + node)
    if isinstance(node, list) and node:
        return st.lists(_like(node[0]), max_size=4)
    return JSON


@st.composite
def mutated(draw: Any, doc: Any, max_mutations: int = 3) -> Any:
    """`doc` (deep-copied) with 1..max_mutations values replaced by any JSON or keys deleted."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, max_mutations))):
        parent, key, node = None, None, doc
        while isinstance(node, (dict, list)) and node and draw(st.integers(0, 5)):
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            parent, key = node, draw(st.sampled_from(keys))
            node = node[key]
        if parent is None:
            doc = draw(JSON)
        elif isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            del parent[key]
        else:
            parent[key] = draw(JSON if draw(st.integers(0, 3)) == 0 else _like(node))
    return doc

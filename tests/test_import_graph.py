"""The import graph of src/pipeline has no cycle: every `import pipeline.x` / `from pipeline.x
import y` counts, including imports inside functions (a lazy import is how a cycle hides); only
`if TYPE_CHECKING:` blocks are left out (annotations, never executed)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the pipeline modules it imports (`from pkg import sub` counts as pkg.sub)."""
    modules = {module_name(p): p for p in SRC.joinpath("pipeline").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # emptied, so ast.walk finds no imports in them
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                node.body = []
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
                if any(f"{node.module}.{a.name}" in modules for a in node.names):
                    targets.remove(node.module)  # `from pkg import sub`: the submodule only
            graph[mod] |= {t for t in targets if t in modules and t != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_and_package_imports():
    graph = import_graph()
    assert "pipeline.runner" in graph["pipeline.cli"]  # imported inside a function
    assert "pipeline.sources.builtin" in graph["pipeline.sources"]  # `from pkg import sub`
    assert "pipeline.config" in graph["pipeline.stages.clean"]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_config_and_stage_know_nothing_of_recipes_or_the_runner():
    graph = import_graph()
    for low_level in ("pipeline.config", "pipeline.stage", "pipeline.sources.registry"):
        assert not graph[low_level] & {"pipeline.recipe", "pipeline.runner", "pipeline.stages"}

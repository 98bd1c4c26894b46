"""The import graph of src/pipeline has no cycle: every `import pipeline.x` / `from pipeline.x
import y` counts, including imports inside functions and under `if TYPE_CHECKING:` (a lazy or
annotation-only import is how a cycle hides). The algorithm packages import no stage, runner,
executor or Parquet-part code, and `import pipeline.loader` loads numpy and the shard format only.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
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
        for node in ast.walk(tree):  # every import: top level, in functions, under TYPE_CHECKING
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
    assert "pipeline.run.runner" in graph["pipeline.cli"]  # imported inside a function
    assert "pipeline.sources.builtin" in graph["pipeline.sources"]  # `from pkg import sub`
    assert "pipeline.config" in graph["pipeline.stages.clean"]
    # under `if TYPE_CHECKING:` (annotations only) counts too
    assert "pipeline.stages.dedup.config" in graph["pipeline.stages.dedup.reduce"]


def test_the_graph_counts_type_checking_imports(tmp_path, monkeypatch):
    """A cycle tied only by an annotation import is still a cycle."""
    pkg = tmp_path / "pipeline"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pipeline.b import B\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipeline.a import A\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert cycles(import_graph()) == [["pipeline.a", "pipeline.b"]]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_config_and_stage_know_nothing_of_recipes_or_the_runner():
    graph = import_graph()
    for low_level in ("pipeline.config", "pipeline.stage", "pipeline.sources.registry"):
        assert not graph[low_level] & {"pipeline.recipe", "pipeline.run.runner", "pipeline.stages"}


ALGORITHMS = ("dedup", "quality", "clean", "tokenizer", "loader", "sources", "shuffle")
# what an algorithm package must not import: stages, the run machinery, executors, the run
# folder's writers (pipeline.io) and the Parquet-part layer (pipeline.parts, which imports
# pipeline.stage). Algorithms take and return in-memory data; sources/ reads user input
# through pipeline.text_files and pipeline.fetch (docs/overview.md).
FORBIDDEN = (
    "pipeline.stages",
    "pipeline.run",
    "pipeline.executor",
    "pipeline.io",
    "pipeline.stage",
    "pipeline.parts",
)


def test_algorithm_packages_import_no_stage_runner_or_executor():
    graph = import_graph()
    bad = sorted(
        (mod, dep)
        for mod, deps in graph.items()
        if mod.split(".")[1:2] and mod.split(".")[1] in ALGORITHMS
        for dep in deps
        if any(dep == f or dep.startswith(f + ".") for f in FORBIDDEN)
    )
    assert bad == []


def test_import_pipeline_loader_loads_numpy_and_the_shard_format_only():
    code = (
        "import json, sys; import pipeline.loader; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pipeline', 'pyarrow', 'torch', 'pandas'))))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert "pipeline.loader" in loaded and "pipeline.shards" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in ("pyarrow", "torch", "pandas")}
    assert heavy == set()
    for banned in ("pipeline.stage", "pipeline.executor", "pipeline.io", "pipeline.parts"):
        assert banned not in loaded
    assert not {m for m in loaded if m.startswith(("pipeline.run", "pipeline.stages"))}


def test_hypothesis_writes_nothing_into_the_tree():
    """tests/conftest.py: no example database; caches (.hypothesis/) in the temp dir."""
    from hypothesis import settings
    from hypothesis.configuration import storage_directory

    assert settings.default.database is None
    home = storage_directory("constants", intent_to_write=False).home_directory
    assert not Path(home).resolve().is_relative_to(SRC.parent.resolve())

"""An offline corpus of real English prose from the installed Python's own documentation.

Documents: each pydoc topic (pydoc_data.topics), then one per standard-library module holding its
module, class and function docstrings. Docstrings are read with `ast`, never by importing the
module (no side effects), from sorted paths: the corpus is fixed for a given Python version.
"""

from __future__ import annotations

import ast
import inspect
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.sources.records import Record

_SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "turtledemo",
    "site-packages",
    "lib2to3",
    "ensurepip",
    "__pycache__",
    "pydoc_data",
    "config-3.11-x86_64-linux-gnu",
}


def _topics() -> Iterator[Record]:
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip pydoc_data
        return
    for name in sorted(topics):
        text = topics[name].strip()
        if text:
            yield Record(f"pydoc-topic/{name}", text, "python_docs")


def _docstrings(tree: ast.Module) -> list[str]:
    out = []
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and (node is tree or not isinstance(node, ast.Module)):
                out.append(inspect.cleandoc(doc))
    seen, unique = set(), []
    for d in out:  # the module node appears twice (tree and walk); keep first occurrences
        if d not in seen:
            seen.add(d)
            unique.append(d)
    return unique


def _modules(stdlib: Path) -> Iterator[Record]:
    files = []
    for path in stdlib.rglob("*.py"):
        rel = path.relative_to(stdlib)
        if any(part in _SKIP_DIRS or part.startswith("test") for part in rel.parts[:-1]):
            continue
        files.append(rel)
    for rel in sorted(files, key=lambda p: p.as_posix()):
        try:
            tree = ast.parse((stdlib / rel).read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        docs = _docstrings(tree)
        if docs:
            module = rel.with_suffix("").as_posix().replace("/", ".")
            yield Record(f"stdlib/{module}", "\n\n".join(docs), "python_docs")


def generate() -> Iterator[Record]:
    yield from _topics()
    yield from _modules(Path(sysconfig.get_paths()["stdlib"]))


ABOUT = "offline real English prose: the installed Python's documentation"


def read_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record]:
    """The registered `python_docs` source (reads nothing from cfg)."""
    return generate()

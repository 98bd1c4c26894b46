"""Generate docs/recipes.md, the recipe reference, from the config dataclasses themselves.

Every key's default and meaning come from the dataclass field and its trailing `# comment`, so
the reference cannot drift from the code (a test compares the file with this output).
Run: `python -m pipeline.docgen > docs/recipes.md` (or `make docs`).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from pipeline.config import ExecutorConfig, RunConfig
from pipeline.stages import STAGES
from pipeline.train.config import PretrainConfig  # torch-free: the `pretrain:` block only

_FIELD = re.compile(r"^\s+(\w+):\s*[^#=]+=[^#]*?(?:#\s*(.+))?$")
_COMMENT = re.compile(r"^\s+#\s*(.+)$")


def field_comments(cls: type) -> dict[str, str]:
    """{field name: its trailing `# comment`, or the comment line just above it}."""
    out, above = {}, ""
    for line in inspect.getsource(cls).splitlines():
        if m := _COMMENT.match(line):
            above = m.group(1).strip()
        elif m := _FIELD.match(line):
            out[m.group(1)] = (m.group(2) or above).strip()
            above = ""
        else:
            above = ""
    return out


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "required"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _type(f: dataclasses.Field) -> str:
    text = str(f.type).replace("typing.", "")
    return text.replace("|", "\\|")


def table(cls: type) -> list[str]:
    comments = field_comments(cls)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        rng = {k: v for k, v in f.metadata.items() if v is not None and k != "input"}
        bounds = ", ".join(f"{k} {v}" for k, v in rng.items())
        meaning = comments.get(f.name, "").replace("|", "\\|")
        if bounds:
            meaning += f" ({bounds})"
        if f.metadata.get("input"):
            meaning += " (a named file's content enters the fingerprint)"
        rows.append(f"| `{f.name}` | {_type(f)} | {_default(f)} | {meaning} |")
    return rows


def _source(cls: type) -> str:
    """The file that defines `cls`, from the repository root (src/pipeline/...)."""
    path = Path(inspect.getsourcefile(cls) or "").resolve()
    return path.relative_to(Path(__file__).resolve().parent.parent.parent).as_posix()


def generate() -> str:
    lines = [
        "# Recipe reference",
        "",
        "Generated from the config dataclasses by `python -m pipeline.docgen` (`make docs`);",
        "do not edit by hand. `python -m pipeline show --config R` prints a recipe with every",
        "default filled in. Ranges: `ge` ≥, `gt` >, `le` ≤, `lt` <.",
        "",
        "## Run keys (top level)",
        "",
        *table(RunConfig),
        "",
        "### `executor:` (a run key: where per-part work runs; see docs/scale.md)",
        "",
        *table(ExecutorConfig),
        "",
    ]
    for name, stage in STAGES.items():
        lines += [
            f"## `{name}:`",
            "",
            f"`{stage.config_cls.__name__}` in `{_source(stage.config_cls)}`.",
            "",
            *table(stage.config_cls),
            "",
        ]
    lines += [
        "## `pretrain:` (its own recipe file, `pipeline pretrain` / `pipeline ablate`)",
        "",
        f"`PretrainConfig` in `{_source(PretrainConfig)}`; see docs/pretrain.md.",
        "",
        *table(PretrainConfig),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(generate(), end="")

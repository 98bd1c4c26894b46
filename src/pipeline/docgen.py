"""Generate docs/recipes.md, the recipe reference, from the config dataclasses themselves.

Every key's default, range and meaning come from the dataclass field itself (its `doc`, given by
pipeline.config's option / bounded / input_path), and each config's file from its class, so the
reference cannot drift from the code (a test compares the file with this output).
Run: `python -m pipeline.docgen > docs/recipes.md` (or `make docs`).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path

from pipeline.config import ExecutorConfig, RunConfig
from pipeline.reference_keys import REFERENCE_KEYS, SHORTHAND
from pipeline.stages import STAGES
from pipeline.train.config import PretrainConfig  # torch-free: the `pretrain:` block only


def field_docs(cls: type) -> dict[str, str]:
    """{field name: its meaning} (empty for a field declared without a doc)."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}


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
    docs = field_docs(cls)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        rng = {k: v for k, v in f.metadata.items() if v is not None and k not in ("doc", "input")}
        bounds = ", ".join(f"{k} {v}" for k, v in rng.items())
        meaning = docs[f.name].replace("|", "\\|")
        if bounds:
            meaning += f" ({bounds})"
        if f.metadata.get("input"):
            meaning += " (a named file's content enters the fingerprint)"
        rows.append(f"| `{f.name}` | {_type(f)} | {_default(f)} | {meaning} |")
    return rows


def nested_lists(cls: type) -> list[tuple[str, type]]:
    """(field, entry class) of each field that holds a list of config dataclasses."""
    out = []
    for name, tp in typing.get_type_hints(cls).items():
        for arg in typing.get_args(tp) or (tp,):
            if typing.get_origin(arg) is list:
                (item,) = typing.get_args(arg)
                if dataclasses.is_dataclass(item):
                    out.append((name, item))
    return out


def nested_tables(section: str, cls: type) -> list[str]:
    """A table for each field of `cls` that is itself a block of keys (`quality.external:`)."""
    out: list[str] = []
    for f in dataclasses.fields(cls):
        if f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            continue
        sub = f.default_factory()  # type: ignore[misc]
        if not dataclasses.is_dataclass(sub):
            continue
        key = f"{section}.{f.name}"
        doc = field_docs(cls)[f.name]
        out += [f"### `{key}:` ({doc})", "", *table(type(sub)), ""]
        out += nested_tables(key, type(sub))
    return out


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
        for key, cls in nested_lists(stage.config_cls):
            lines += [
                f"### `{name}.{key}[]`: each entry (`{cls.__name__}`)",
                "",
                *table(cls),
                "",
            ]
        lines += nested_tables(name, stage.config_cls)
    lines += [
        "## `pretrain:` (its own recipe file, `pipeline pretrain` / `pipeline ablate`)",
        "",
        f"`PretrainConfig` in `{_source(PretrainConfig)}`; see docs/pretrain.md.",
        "",
        *table(PretrainConfig),
        "",
    ]
    return "\n".join(lines + reference_keys_section())


def reference_keys_section() -> list[str]:
    """The footer: the reference pipeline's key names (design doc 002) and what each does here."""
    rows = [
        "## The reference pipeline's key names",
        "",
        "The reference pipeline (design doc 002) writes flat recipes. Its four corpus keys work",
        "at the top level as a shorthand for the `download:` block:",
        "",
        "```yaml",
        "source: jsonl                   # = download.source",
        "source_path: data/raw/mine.jsonl  # = download.path",
        "```",
        "",
        'Why a shorthand: the document\'s own snippet for "use your own JSONL" is this form,',
        "and `source`, `source_path`, `source_name` (a builtin name) and `max_docs` mean what our",
        "download keys mean. A value set both ways must agree (else one-line error), and `--set`",
        "/ `--source` / `--jsonl` still win. Every other name of the document is refused with one",
        "line naming our key, its range and its default: their meaning differs (a switch versus a",
        "list of PII kinds, one n-gram ratio versus Gopher's per-n fractions) or the key belongs",
        "in a stage block, and a silent alias would give one setting two names.",
        "",
        "| reference key | here | what the document says |",
        "|---|---|---|",
    ]
    for ref in REFERENCE_KEYS:
        here = f"`{ref.ours}`" if ref.ours else "none"
        how = "shorthand" if ref.name in SHORTHAND else "error naming it"
        note = f" ({ref.note})" if ref.note else ""
        cells = [f"`{ref.name}`", f"{here}: {how}{note}", ref.doc]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return rows + [
        "",
        "## Without a recipe",
        "",
        "`pipeline data --source jsonl --jsonl F [--out-dir D]` (or `--parquet F`, `--text F`,",
        "`--hf NAME`; each flag selects its source) runs the built-in default recipe: every stage",
        "with the defaults above, `out_dir: data/default`. `pipeline show --jsonl F` prints it.",
        "",
    ]


if __name__ == "__main__":
    print(generate(), end="")

"""Recipes: YAML (safe_load) into frozen, typed config dataclasses, validated in full up front.

A recipe is a mapping of run keys (name, seed, out_dir, workers, executor) and one block per
stage. A stage block that is present (even empty or null) enables the stage; `stage: false`
disables it. Every error names the key's path, the value given and what is expected, and
suggests the closest key. Each enabled stage's `needs` are checked here, before anything runs.
The typed conversion itself lives in config.py.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.config import RunConfig, build_config
from pipeline.errors import DataError, RecipeError, short
from pipeline.reference_keys import check_block_keys, check_top_level, expand_shorthand
from pipeline.sources import source_names
from pipeline.stages import STAGES
from pipeline.text_files import bom_encoding, decode_text


@dataclass(frozen=True)
class Recipe:
    run: RunConfig
    stages: dict[str, Any]  # enabled stage name -> its frozen <Name>Config, in pipeline order
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dataclasses.asdict(self.run)
        for name, cfg in self.stages.items():
            out[name] = dataclasses.asdict(cfg)
        return out


# ---------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[list[str], Any]:
    """`download.max_docs=500` -> (['download', 'max_docs'], 500); the value is read as YAML."""
    if "=" not in text:
        raise RecipeError("--set", f"got {short(text)}, expected stage.key=value")
    key, _, value = text.partition("=")
    keys = key.strip().split(".")
    if not all(keys):
        raise RecipeError("--set", f"got {short(text)}, expected stage.key=value")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return keys, parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        keys, value = parse_override(text)
        node = raw
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        node[keys[-1]] = value
    return raw


def read_yaml(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise RecipeError("", f"recipe file {path} not found")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(str(path), f"cannot read the recipe ({exc.strerror or exc})") from None
    if b"\0" in data[:8192] and bom_encoding(data[:4]) is None:
        raise DataError(str(path), "is a binary file, not a YAML recipe")
    text = decode_text(data, str(path))  # a byte-order mark is dropped (UTF-16/32 decoded)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = short(str(getattr(exc, "problem", None) or exc), 120)
        raise RecipeError("", f"{where}: not valid YAML ({problem})") from None
    except RecursionError:
        raise RecipeError("", f"{path}: nested too deeply to be a recipe") from None
    check_size(raw, str(path))
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError("", f"{path}: expected a mapping of keys at the top level")
    return raw


MAX_VALUES = 100_000  # scalars + containers a recipe may expand to (YAML aliases included)


def check_size(raw: Any, where: str, limit: int = MAX_VALUES) -> None:
    """RecipeError if `raw` expands to more than `limit` values. YAML aliases share objects, so
    a 300-byte "billion laughs" loads fine but explodes when copied, hashed or printed; the walk
    stops at the limit, so its cost is bounded too (and it ends on self-referencing aliases)."""
    stack, seen = [raw], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            raise RecipeError(
                "",
                f"{where}: the recipe expands to more than {limit:,} values "
                "(YAML aliases repeating a block?); write the values out",
            )
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)


def build_recipe(raw: dict[str, Any], path: str = "") -> Recipe:
    raw = expand_shorthand(raw)  # top-level source / source_path / source_name / max_docs
    run_keys = {f.name for f in dataclasses.fields(RunConfig)}
    run_raw = {k: v for k, v in raw.items() if k in run_keys}
    valid = sorted(run_keys | set(STAGES))
    classes = {"": RunConfig, **{name: s.config_cls for name, s in STAGES.items()}}
    check_block_keys(raw, run_keys, classes)  # the reference pipeline's names in a block
    for key in raw:
        if key == "pretrain":  # the proxy-training block has its own command
            raise RecipeError(key, "a pretrain recipe: run it with `pipeline pretrain --config`")
        if key not in run_keys and key not in STAGES:
            check_top_level(str(key), classes)  # its flat names: the error names our key
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
            raise RecipeError(
                str(key),
                "unknown key (not a run key nor a registered stage)",
                close[0] if close else None,
            )
    run = build_config(RunConfig, run_raw, "")
    stages = {}
    for name, stage in STAGES.items():
        if name not in raw or raw[name] is False:
            continue
        stages[name] = build_config(stage.config_cls, raw[name], name)
    if not stages:
        raise RecipeError("", f"no stage enabled; add a block for one of: {', '.join(STAGES)}")
    check_needs(list(stages))
    return Recipe(run=run, stages=stages, path=path)


def check_needs(enabled: list[str]) -> None:
    """Every enabled stage's `needs` are enabled too (the registry keeps them earlier in the
    order), so a recipe never runs three stages and then stops for a missing fourth."""
    first = next(iter(STAGES))
    for name in enabled:
        missing = [need for need in STAGES[name].needs if need not in enabled]
        if not missing:
            continue
        if missing[0] == first:
            raise RecipeError(
                name,
                f"has no input: every run starts with a `{first}:` block "
                f"(source: {'/'.join(source_names('files'))} reads your own files)",
            )
        raise RecipeError(
            name, f"needs the {missing[0]} stage: add a `{missing[0]}:` block to the recipe"
        )


def load_recipe(path: Path | None, overrides: list[str] | None = None) -> Recipe:
    """The recipe at `path` (None: the built-in default, DEFAULT_RECIPE) with `--set`
    overrides applied after its top-level shorthand, so a flag wins over the file."""
    raw = read_yaml(path) if path is not None else yaml.safe_load(DEFAULT_RECIPE)
    raw = apply_overrides(expand_shorthand(raw), list(overrides or []))
    check_size(raw, "--set")
    return build_recipe(raw, str(path) if path is not None else DEFAULT_RECIPE_NAME)


DEFAULT_RECIPE_NAME = "<built-in default recipe>"
# What `pipeline data --source jsonl --jsonl F` runs without --config (`pipeline show --source
# jsonl --jsonl F` prints it with every default): every stage with its recommended defaults.
DEFAULT_RECIPE = """\
name: default
seed: 0
out_dir: data/default   # --out-dir D replaces it
workers: 1              # --workers N: local processes
download: {}            # source and path come from --source/--jsonl/--parquet/--text/--hf
clean: {}               # Gopher/C4/FineWeb rules, published defaults (docs/clean.md)
dedup: {}               # exact + MinHash near duplicates at Jaccard 0.8 (docs/dedup.md)
quality: {}             # keep documents scoring >= 0.5 (docs/quality.md)
tokenize: {}            # byte-level BPE, vocab_size 8192 (docs/tokenizer.md)
pack: {}                # best-fit-decreasing into 2048-token sequences (docs/packing.md)
shard: {}               # .npz shards of 4096 sequences, 1% held out for eval (docs/shards.md)
"""


def no_config_message(folder: Path) -> str:
    """What to do without --config: the recipes in `folder` with their first comment line."""
    found = sorted(Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []
    if not found:
        return (
            f"no --config given and no recipes in {folder}/: pass a recipe YAML with --config "
            "(every key is in docs/recipes.md; `download: {source: python_docs}` runs offline), "
            "or `--source jsonl --jsonl FILE` for the built-in default recipe"
        )
    rows = []
    for path in found:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        rows.append(
            f"{path} ({first.lstrip('# ').strip()})" if first.startswith("#") else str(path)
        )
    demo = next((p for p in found if p.stem == "data_demo"), found[0])
    return (
        f"no --config given; try `pipeline data --config {demo}`, or `pipeline data --source "
        "jsonl --jsonl FILE` for the built-in default recipe. Recipes: " + "; ".join(rows)
    )


def dump_recipe(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.to_dict(), sort_keys=False, allow_unicode=True)

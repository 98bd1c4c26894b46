"""Recipes: YAML (safe_load) into frozen, typed config dataclasses, validated in full up front.

A recipe is a mapping of run keys (name, seed, out_dir, workers) and one block per stage. A stage
block that is present (even empty or null) enables the stage; `stage: false` disables it. Every
error names the key's path, the value given and what is expected, and suggests the closest key.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.errors import RecipeError


def bounded(
    default: Any,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> Any:
    """A dataclass field whose numeric value must lie in the given range (None passes)."""
    return field(default=default, metadata={"ge": ge, "gt": gt, "le": le, "lt": lt})


@dataclass(frozen=True)
class RunConfig:
    name: str = "run"  # run name, used in the report
    seed: int = 0  # the one recipe seed; each stage derives its own from (seed, stage name)
    out_dir: str = "data/run"  # run folder: manifest, report and one sub-folder per stage
    workers: int = bounded(1, ge=1)  # local process pool size; 1 runs inline


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


def config_hash(cfg: Any) -> str:
    """Stable hash of a config dataclass (its fields as sorted JSON)."""
    blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# ---------------------------------------------------------------- typed conversion


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        k, v = typing.get_args(tp)
        return f"a mapping of {_type_name(k)} to {_type_name(v)}"
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _convert(value: Any, tp: Any, path: str) -> Any:
    """Check `value` against the annotation `tp`; returns the (possibly coerced) value."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return build_config(tp, value, path)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, path)
            except RecipeError:
                continue
        raise RecipeError(path, f"got {value!r}, expected {_type_name(tp)}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value in choices:
            return value
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        raise RecipeError(
            path, f"got {value!r}, expected {_type_name(tp)}", close[0] if close else None
        )
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise RecipeError(path, f"got {value!r}, expected {_type_name(tp)}")
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        kt, vt = typing.get_args(tp)
        if not isinstance(value, dict):
            raise RecipeError(path, f"got {value!r}, expected {_type_name(tp)}")
        return {_convert(k, kt, path): _convert(v, vt, f"{path}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            return int(value)  # 1e6 in YAML is a float
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # `--set x.name=2024` arrives as an int
    raise RecipeError(path, f"got {value!r}, expected {_type_name(tp)}")


def _check_range(value: Any, meta: Any, path: str) -> None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    ge, gt, le, lt = (meta.get(k) for k in ("ge", "gt", "le", "lt"))
    lo = f"[{ge}" if ge is not None else (f"({gt}" if gt is not None else "(-inf")
    hi = f"{le}]" if le is not None else (f"{lt})" if lt is not None else "inf)")
    bad = (
        (ge is not None and value < ge)
        or (gt is not None and value <= gt)
        or (le is not None and value > le)
        or (lt is not None and value >= lt)
    )
    if bad:
        raise RecipeError(path, f"must be in {lo}, {hi}, got {value!r}")


def build_config(cls: type, raw: Any, path: str) -> Any:
    """Build the frozen dataclass `cls` from a mapping, validating every key."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError(path, f"got {raw!r}, expected a mapping of keys")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.5)
            where = f"{path}.{key}" if path else str(key)
            raise RecipeError(where, "unknown key", close[0] if close else None)
    kwargs = {}
    for name, f in fields.items():
        if name not in raw:
            continue
        where = f"{path}.{name}" if path else name
        value = _convert(raw[name], hints[name], where)
        _check_range(value, f.metadata, where)
        kwargs[name] = value
    cfg = cls(**kwargs)
    validate = getattr(cfg, "validate", None)
    if callable(validate):
        validate(path)
    return cfg


# ---------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[list[str], Any]:
    """`download.max_docs=500` -> (['download', 'max_docs'], 500); the value is read as YAML."""
    if "=" not in text:
        raise RecipeError("--set", f"got {text!r}, expected stage.key=value")
    key, _, value = text.partition("=")
    keys = key.strip().split(".")
    if not all(keys):
        raise RecipeError("--set", f"got {text!r}, expected stage.key=value")
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
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RecipeError("", f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError("", f"{path}: expected a mapping of keys at the top level")
    return raw


def build_recipe(raw: dict[str, Any], path: str = "") -> Recipe:
    from pipeline.stages import ORDER, STAGES

    run_keys = {f.name for f in dataclasses.fields(RunConfig)}
    run_raw = {k: v for k, v in raw.items() if k in run_keys}
    valid = sorted(run_keys | set(STAGES))
    for key in raw:
        if key not in run_keys and key not in STAGES:
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
            raise RecipeError(
                str(key),
                "unknown key (not a run key nor a registered stage)",
                close[0] if close else None,
            )
    run = build_config(RunConfig, run_raw, "")
    stages = {}
    for name in ORDER:
        if name not in STAGES or name not in raw or raw[name] is False:
            continue
        stages[name] = build_config(STAGES[name].config_cls, raw[name], name)
    if not stages:
        raise RecipeError("", f"no stage enabled; add a block for one of: {', '.join(STAGES)}")
    first = next(iter(stages))
    if first != "download":
        raise RecipeError(
            first,
            "has no input: every run starts with a `download:` block "
            "(source: jsonl/parquet/text reads your own files)",
        )
    return Recipe(run=run, stages=stages, path=path)


def load_recipe(path: Path, overrides: list[str] | None = None) -> Recipe:
    raw = apply_overrides(read_yaml(path), list(overrides or []))
    return build_recipe(raw, str(path))


def dump_recipe(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.to_dict(), sort_keys=False, allow_unicode=True)

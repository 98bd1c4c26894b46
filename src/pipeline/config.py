"""Typed configuration: frozen dataclasses built from plain mappings, validated key by key.

`option` gives a field its meaning (docs/recipes.md is generated from it), `bounded` also a
numeric range, `input_path` marks a field naming input files; `build_config` converts a mapping
into a config dataclass (types, ranges, unknown keys with the closest valid one, then the
class's `validate`);
`config_hash` fingerprints a config. Knows nothing of stages or recipes: every stage module and
recipe.py import it, so it imports nothing of the pipeline but errors.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import types
import typing
from dataclasses import field
from typing import Any, ClassVar, Literal

from pipeline.errors import RecipeError, short


def option(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = None) -> Any:
    """A config field with its meaning (`doc`: one line, with the unit), which the recipe
    reference (pipeline.docgen) prints; `factory` for a mutable default."""
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


def bounded(
    default: Any,
    *,
    doc: str = "",
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> Any:
    """A config field whose numeric value must lie in the given range (None passes)."""
    return field(default=default, metadata={"doc": doc, "ge": ge, "gt": gt, "le": le, "lt": lt})


SEED_LIMIT = 2**63 - 1  # seeds are in [0, 2^63 - 1): numpy wants >= 0, readers int64 (+1)


def input_path(default: Any = None, *, doc: str = "") -> Any:
    """A dataclass field naming input files (a file, folder or glob, or a list of them): their
    content enters the stage's fingerprint (pipeline.run.input_hashes). Fields named `*_path` /
    `*_paths` count as input paths without this marker."""
    return field(default=default, metadata={"doc": doc, "input": True})


@dataclasses.dataclass(frozen=True)
class ExecutorConfig:
    kind: Literal["local", "ray"] = option(
        "local", "local process pool, or Ray tasks (the `ray` extra)"
    )
    address: str | None = option(
        None,
        "ray: null = a private local Ray of `workers` CPUs; auto = the running cluster; ray://h:port",
    )
    max_retries: int = bounded(
        3, ge=0, doc="ray: re-runs of a task whose worker died or hit OSError"
    )
    max_in_flight: int | None = bounded(
        None, ge=1, doc="ray: tasks submitted at once; null = 2 x CPUs"
    )

    def validate(self, path: str) -> None:
        if self.kind == "local" and self.address is not None:
            raise RecipeError(f"{path}.address", "only applies to kind: ray (set kind: ray)")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    RECIPE_SECTION: ClassVar[str] = ""  # run keys sit at the top level of a recipe

    name: str = option("run", "run name, used in the report")
    seed: int = bounded(0, ge=0, lt=SEED_LIMIT, doc="the one recipe seed; stages derive their own")
    out_dir: str = option("data/run", "run folder: manifest, report and one sub-folder per stage")
    workers: int = bounded(1, ge=1, doc="local process pool size; 1 runs inline")
    executor: ExecutorConfig = option(factory=ExecutorConfig, doc="where per-part work runs")


_FROM_CONFIG = object()


def recipe_key(cfg: Any, name: str) -> str:
    """The recipe key of config field `name`: `clean.min_words`, or `seed` for a run key.

    `cfg` is a config dataclass or an instance. The section comes from the class: its
    `RECIPE_SECTION` (RunConfig: "" for top-level keys) or the `<Name>Config` naming rule that
    every stage follows (tests check it against the stage registry), so a key in the report is
    always one the recipe accepts, with no second table of names.
    """
    cls = cfg if isinstance(cfg, type) else type(cfg)
    # a stage naming a field its config lacks is a bug in the stage, not a user error
    assert name in {f.name for f in dataclasses.fields(cls)}, f"{cls.__name__} has no {name!r}"
    section = getattr(cls, "RECIPE_SECTION", None)
    if section is None:
        section = cls.__name__.removesuffix("Config").lower()
    return f"{section}.{name}" if section else name


def setting(cfg: Any, name: str, stat: str | None = None, value: Any = _FROM_CONFIG) -> dict:
    """`{stat: value, "<stat>_key": recipe key}`: a setting echoed in a stage's stats, named by
    the recipe key that sets it. `value` defaults to the config's; pass it for derived values
    (dedup's bands when computed from the threshold)."""
    stat = stat or name
    value = getattr(cfg, name) if value is _FROM_CONFIG else value
    return {stat: value, f"{stat}_key": recipe_key(cfg, name)}


def with_keys(stats: dict[str, Any], cfg: Any, fields: dict[str, str]) -> dict[str, Any]:
    """A copy of `stats` with `<stat>_key` right after each stat that echoes a config field
    (`fields`: stat name -> field name), for nested sections a core builds (quality's `lm`)."""
    out: dict[str, Any] = {}
    for k, v in stats.items():
        out[k] = v
        if k in fields:
            out[f"{k}_key"] = recipe_key(cfg, fields[k])
    return out


def config_hash(cfg: Any) -> str:
    """Stable hash of a config dataclass (its fields as sorted JSON)."""
    blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


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
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and isinstance(value, (list, dict)):
            # `list[X] | None` given a list: the error inside it (download.sources[0].weight)
            return _convert(value, others[0], path)
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, path)
            except RecipeError:
                continue
        raise RecipeError(path, f"got {short(value)}, expected {_type_name(tp)}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value in choices:
            return value
        text = value if isinstance(value, str) else ""
        close = difflib.get_close_matches(text, [str(c) for c in choices], n=1)
        raise RecipeError(
            path, f"got {short(value)}, expected {_type_name(tp)}", close[0] if close else None
        )
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise RecipeError(path, f"got {short(value)}, expected {_type_name(tp)}")
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        kt, vt = typing.get_args(tp)
        if not isinstance(value, dict):
            raise RecipeError(path, f"got {short(value)}, expected {_type_name(tp)}")
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
            if not math.isfinite(value):  # .nan passes every range check and disables guards
                raise RecipeError(path, f"got {value!r}, expected a finite number")
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # `--set x.name=2024` arrives as an int
    raise RecipeError(path, f"got {short(value)}, expected {_type_name(tp)}")


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
        raise RecipeError(path, f"must be in {lo}, {hi}, got {short(value)}")


def build_config(cls: type, raw: Any, path: str) -> Any:
    """Build the frozen dataclass `cls` from a mapping, validating every key."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError(path, f"got {short(raw)}, expected a mapping of keys")
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

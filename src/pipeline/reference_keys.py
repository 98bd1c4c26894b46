"""The reference pipeline's recipe key names (design doc 002): a shorthand for four, an error
naming our key for every other one.

Its recipes are flat (`source: jsonl`, `source_path: …`, `do_nfkc: true`, `dedup_threshold:
0.85`); ours have one block per stage. The four keys that pick the corpus (`source`,
`source_path`, `source_name`, `max_docs`) are accepted at the top level as a shorthand for the
`download:` block: its own "use your own JSONL" snippet is exactly that form, and each means what
our download key means. Every other name gets a one-line RecipeError naming our exact key with
its range and default: the meanings differ (`max_ngram_dup_ratio` vs Gopher's per-n fractions,
`redact_pii` a switch vs a list of kinds) or the key belongs in a stage block, and a silent
alias would give one setting two names. Knows the config classes only through the caller.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.errors import RecipeError, short

# top-level shorthand -> the download field it sets
SHORTHAND = {
    "source": "source",
    "source_path": "path",
    "source_name": "source",
    "max_docs": "max_docs",
}


@dataclass(frozen=True)
class RefKey:
    name: str  # the reference pipeline's key
    ours: str | None  # our recipe key (`stage.field`), or None: no such setting here
    note: str = ""  # what differs, appended to the error
    doc: str = ""  # the design document's wording, paraphrased (docs/recipes.md)


REFERENCE_KEYS: tuple[RefKey, ...] = (
    RefKey("source", "download.source", "", "`source: jsonl` picks the reader"),
    RefKey("source_path", "download.path", "", "`source_path: data/raw/mine.jsonl`"),
    RefKey("source_name", "download.source", "", "builtin corpus name, e.g. tinystories_train"),
    RefKey("max_docs", "download.max_docs", "", "cut a large builtin to this many documents"),
    RefKey("do_nfkc", "clean.nfkc", "", "NFKC normalisation switch"),
    RefKey("strip_html", "clean.strip_html", "", "drop HTML tags and entities"),
    RefKey(
        "redact_pii",
        "clean.redact_pii",
        "a list of kinds here, not a switch: [] turns redaction off",
        "redact email / URL / IP / phone / keys to <|xxx|> tokens",
    ),
    RefKey("min_chars", "clean.min_chars", "", "drop documents that are too short"),
    RefKey(
        "min_alpha_ratio",
        "clean.min_alpha_words_frac",
        "share of words containing a letter, not of letters per character",
        "minimum share of alphabetic characters",
    ),
    RefKey(
        "max_ngram_dup_ratio",
        "clean.max_dup_5gram_chars_frac",
        "Gopher's per-n limits: max_dup_6gram_chars_frac … max_dup_10gram_chars_frac too",
        "max share of repeated n-grams (suggested 0.30 -> 0.05 to see BPE compression change)",
    ),
    RefKey("dedup_threshold", "dedup.threshold", "", "MinHash Jaccard threshold 0.85, try 0.7"),
    RefKey("num_perm", "dedup.num_perm", "", "MinHash permutations (64 there)"),
    RefKey(
        "rows_per_band",
        "dedup.rows",
        "set together with dedup.bands; null: both chosen from dedup.threshold",
        "LSH rows per band (8 there: 8 bands of 8)",
    ),
    RefKey("vocab", "tokenize.vocab_size", "", "BPE vocabulary 4096 (2048 is too small)"),
    RefKey("seq_len", "pack.seq_len", "", "packed sequence length 512"),
    RefKey(
        "attn_window",
        None,
        "it is a model setting of the reference's pretrain recipe (data recipes have no model)",
        "sliding attention window, -1 turns it off",
    ),
    RefKey(
        "verbose",
        None,
        "merged documents are printed by `pipeline inspect RUN --stage dedup --cluster N` and "
        "the report's dedup examples",
        "print merged documents in a verbose log to check they are real duplicates",
    ),
    RefKey(
        "reject_reasons",
        None,
        "it is a report field: the clean stage's `dropped_<rule>` counts in pipeline_report.json; "
        "`pipeline inspect RUN --stage clean --reason RULE` prints examples",
        "the distribution of rejection reasons to look at before tightening thresholds",
    ),
)
BY_NAME = {k.name: k for k in REFERENCE_KEYS}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _values(base: Any, meta: Any) -> str:
    ge, gt, le, lt = (meta.get(k) for k in ("ge", "gt", "le", "lt"))
    if typing.get_origin(base) is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(base))
    if base is bool:
        return "true or false"
    if typing.get_origin(base) is list:
        return "a list"
    lo = f"[{_num(ge)}" if ge is not None else f"({_num(gt)}" if gt is not None else None
    hi = f"{_num(le)}]" if le is not None else f"{_num(lt)})" if lt is not None else None
    if ge is not None and le is not None:
        return f"{_num(ge)}–{_num(le)}"
    if lo and hi:
        return f"{lo}, {hi}"
    if lo:
        return f"≥ {_num(ge)}" if ge is not None else f"> {_num(gt)}"
    if hi:
        return f"≤ {_num(le)}" if le is not None else f"< {_num(lt)}"
    return {int: "an integer", float: "a number", str: "a string"}.get(base, "a value")


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return _num(value) if isinstance(value, float) else str(value)


def describe_field(cls: type, name: str) -> str:
    """`0–1 or null, default 0.15`: a config field's accepted values and its default."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    tp = typing.get_type_hints(cls)[name]
    args = typing.get_args(tp)
    nullable = type(None) in args
    base = next(a for a in args if a is not type(None)) if nullable else tp
    values = _values(base, f.metadata)
    if nullable:
        values += " or null"
    if f.default is not dataclasses.MISSING:
        return f"{values}, default {_yaml_value(f.default)}"
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f"{values}, default {_yaml_value(f.default_factory())}"  # type: ignore[misc]
    return values


def reference_error(name: str, where: str, classes: dict[str, type]) -> RecipeError:
    """The one-line error for a reference key `name` found at recipe path `where`.

    `classes`: recipe section -> its config class (stage names and "" for run keys)."""
    ref = BY_NAME[name]
    if ref.ours is None:
        return RecipeError(where, f"`{name}` is no data-recipe key here: {ref.note}")
    section, _, field_name = ref.ours.partition(".")
    text = f"`{name}` is `{ref.ours}` here ({describe_field(classes[section], field_name)})"
    if ref.note:
        text += f"; {ref.note}"
    return RecipeError(where, text)


def stage_key_error(key: str, classes: dict[str, type]) -> RecipeError | None:
    """A top-level key that is a field of stage blocks: the error that names them."""
    owners = [
        s for s, cls in classes.items() if s and key in {f.name for f in dataclasses.fields(cls)}
    ]
    if not owners:
        return None
    where = " or ".join(f"`{s}.{key}`" for s in owners)
    first = owners[0]
    return RecipeError(
        key,
        f"`{key}` is {where} here ({describe_field(classes[first], key)}): "
        f"put it in the `{first}:` block",
    )


def check_block_keys(raw: dict[str, Any], run_keys: set[str], classes: dict[str, type]) -> None:
    """Reference names inside stage blocks (`dedup: {dedup_threshold: 0.7}`): RecipeError naming
    our key. A name that is also our own field in that block (download.max_docs) passes."""
    for section, block in raw.items():
        if section in run_keys or section not in classes or not isinstance(block, dict):
            continue
        ours = {f.name for f in dataclasses.fields(classes[section])}
        for key in block:
            if key in BY_NAME and key not in ours:
                raise reference_error(key, f"{section}.{key}", classes)


def check_top_level(key: str, classes: dict[str, type]) -> None:
    """Raise the helpful error for an unknown top-level `key`, if there is one to give."""
    if key in BY_NAME and key not in SHORTHAND:
        raise reference_error(key, key, classes)
    err = stage_key_error(key, classes)
    if err is not None:
        raise err


def expand_shorthand(raw: dict[str, Any]) -> dict[str, Any]:
    """Move top-level `source` / `source_path` / `source_name` / `max_docs` into the
    `download:` block (a copy of `raw`). A value the block sets differently is an error, so
    the recipe never means two things."""
    given = {k: raw[k] for k in SHORTHAND if k in raw}
    if not given:
        return raw
    out = {k: v for k, v in raw.items() if k not in SHORTHAND}
    if "source" in given and "source_name" in given and given["source"] != given["source_name"]:
        raise RecipeError(
            "source_name",
            f"sets download.source, as `source` does: got both {short(given['source'])} and "
            f"{short(given['source_name'])}; keep one",
        )
    block = raw.get("download")
    if block is False:
        raise RecipeError("download", f"is false, but {', '.join(given)} set its keys")
    if block is not None and not isinstance(block, dict):
        raise RecipeError("download", f"got {short(block)}, expected a mapping of keys")
    merged = dict(block or {})
    for key, value in given.items():
        field_name = SHORTHAND[key]
        if field_name in merged and merged[field_name] != value:
            raise RecipeError(
                key,
                f"is a shorthand for download.{field_name}, which the download: block sets to "
                f"{short(merged[field_name])}; got {short(value)}: keep one",
            )
        merged[field_name] = value
    if "path" in merged and "source" not in merged:
        raise RecipeError(
            "source_path", "needs `source: jsonl`, `parquet` or `text` (which reader to use)"
        )
    out["download"] = merged
    return out

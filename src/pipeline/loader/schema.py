"""The loader's inputs, each checked by one schema before anything uses it: a shard folder's
metadata.json, a GlobalSampler state and an IterableTokenShards state. A value that does not
fit is one DataError line naming the file (or state) and the field, got and expected. Shard
files themselves are checked by pipeline.shards.read_members (headers, sizes) and the dataset
(shapes against metadata). Not here: what the values mean (dataset, sampler, iterable).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError, short

SEED_RANGE = (-(2**63), 2**64)  # a seed is a 64-bit word, signed or unsigned
REQUIRED_FIELDS = ("input_ids", "segment_ids")


class StateError(DataError, ValueError):
    """A loader state that does not fit this loader. A DataError (one line at the CLI) and a
    ValueError, which load_state_dict raised before the schema existed."""


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_int(
    where: str, name: str, v: Any, low: int | None = None, high: int | None = None, err=DataError
) -> int:
    """`v` as an int in [low, high) (either bound optional), else `err(where, ...)`."""
    bounds = ""
    if low is not None and high is not None:
        bounds = f" in [{low}, {high})"
    elif low is not None:
        bounds = f" >= {low}"
    if not _is_int(v) or (low is not None and v < low) or (high is not None and v >= high):
        raise err(where, f"field '{name}' must be an integer{bounds}, got {short(v)}")
    return int(v)


def _check_type(where: str, name: str, v: Any, kind: type | tuple, what: str, err=DataError):
    if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
        raise err(where, f"field '{name}' must be {what}, got {short(v)}")
    return v


# ---------------------------------------------------------------- metadata.json


def check_shard_file(where: str, name: str, file: Any) -> str:
    """A shard's file name: a plain name inside the folder (no path, no '..')."""
    _check_type(where, name, file, str, "a file name")
    if file in ("", ".", "..") or "/" in file or "\\" in file or "\0" in file:
        raise DataError(
            where, f"field '{name}' must name a file inside the folder, got {short(file)}"
        )
    return file


def check_metadata(meta: Any, meta_path: Path) -> dict[str, Any]:
    """metadata.json of a shard folder, every key the loader reads; returns it unchanged."""
    where = str(meta_path)
    if not isinstance(meta, dict):
        raise DataError(where, f"expected a JSON object, got {type(meta).__name__}")
    for key in ("seq_len", "shards"):
        if key not in meta:
            raise DataError(where, f"key '{key}' is missing")
    check_int(where, "seq_len", meta["seq_len"], 1)
    fields = meta.get("fields") or list(REQUIRED_FIELDS)
    _check_type(where, "fields", fields, list, "a list of field names")
    for i, f in enumerate(fields):
        _check_type(where, f"fields[{i}]", f, str, "a field name")
    missing = [f for f in REQUIRED_FIELDS if f not in fields]
    if missing:
        raise DataError(where, f"fields {short(fields)} lack {missing}: not token shards")
    dtypes = meta.get("field_dtypes") or {}
    _check_type(where, "field_dtypes", dtypes, dict, "an object {field: dtype}")
    for f, d in dtypes.items():
        try:
            ok = isinstance(d, str) and np.dtype(d).kind in "biufc"  # numbers, never objects
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise DataError(
                where, f"field 'field_dtypes.{f}' must be a numeric dtype, got {short(d)}"
            )
    entries = _check_type(where, "shards", meta["shards"], list, "a list of {file, num_samples}")
    seen: set[str] = set()
    for i, e in enumerate(entries):
        _check_type(where, f"shards[{i}]", e, dict, "an object {file, num_samples, sha256}")
        for key in ("file", "num_samples"):
            if key not in e:
                raise DataError(where, f"field 'shards[{i}].{key}' is missing")
        file = check_shard_file(where, f"shards[{i}].file", e["file"])
        if file in seen:
            raise DataError(where, f"field 'shards[{i}].file': {short(file)} is listed twice")
        seen.add(file)
        check_int(where, f"shards[{i}].num_samples", e["num_samples"], 0)
        if e.get("sha256") is not None:
            _check_type(where, f"shards[{i}].sha256", e["sha256"], str, "a hex digest")
    total = sum(int(e["num_samples"]) for e in entries)
    for key, want in (("num_samples", total), ("num_shards", len(entries))):
        if meta.get(key) is not None and check_int(where, key, meta[key], 0) != want:
            raise DataError(where, f"{key} is {meta[key]}, the shard list gives {want}")
    sizes = meta.get("shard_sizes")
    if sizes is not None:
        _check_type(where, "shard_sizes", sizes, list, "a list of integers")
        got = [check_int(where, f"shard_sizes[{i}]", s, 0) for i, s in enumerate(sizes)]
        if got != [int(e["num_samples"]) for e in entries]:
            raise DataError(where, "shard_sizes disagrees with the shard list")
    for key in ("pre_shuffled",):
        if meta.get(key) is not None:
            _check_type(where, key, meta[key], bool, "true or false")
    for key in ("pad_id", "eos_id"):
        if meta.get(key) is not None:
            check_int(where, key, meta[key], 0)
    if meta.get("split") is not None:
        _check_type(where, "split", meta["split"], str, "a split name")
    return meta


# ---------------------------------------------------------------- loader states


def _state_dict(state: Any, where: str) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise StateError(where, f"must be a dict, got {type(state).__name__}")
    return state


def _require(state: dict, where: str, keys: tuple[str, ...]) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise StateError(where, f"lacks {missing}")


def check_seed(where: str, v: Any, err=DataError) -> int:
    if not _is_int(v) or not SEED_RANGE[0] <= v < SEED_RANGE[1]:
        raise err(where, f"field 'seed' must be an integer that fits in 64 bits, got {short(v)}")
    return int(v)


def check_sampler_state(state: Any, num_samples: int, orders: tuple[str, ...]) -> dict[str, Any]:
    """A GlobalSampler state, every field, against a sampler over `num_samples` samples."""
    where = "sampler state"
    state = _state_dict(state, where)
    _require(state, where, ("seed", "epoch", "order", "cursor", "num_samples"))
    err = StateError
    if state.get("version", 1) != 1:
        raise err(where, f"field 'version' is {short(state['version'])}, this loader reads 1")
    n = check_int(where, "num_samples", state["num_samples"], 0, err=err)
    if n != num_samples:
        raise err(
            where,
            f"state is for {n} samples, this sampler has {num_samples}: another dataset?",
        )
    check_seed(where, state["seed"], err)
    check_int(where, "epoch", state["epoch"], 0, err=err)
    if not isinstance(state["order"], str) or state["order"] not in orders:
        raise err(
            where, f"field 'order' must be one of {', '.join(orders)}, got {short(state['order'])}"
        )
    check_int(where, "cursor", state["cursor"], 0, num_samples + 1, err=err)
    check_int(where, "padded", state.get("padded", 0), 0, err=err)
    if "window_shards" in state:
        check_int(where, "window_shards", state["window_shards"], 1, err=err)
    fp = state.get("shard_sizes_sha256")
    if fp is not None:
        _check_type(where, "shard_sizes_sha256", fp, str, "a hex digest or null", err)
    return state


def _check_rng(where: str, rng: Any) -> None:
    """numpy's PCG64 bit_generator.state: {bit_generator, state: {state, inc}, has_uint32,
    uinteger}, every value an int in range (numpy would take some bad ones silently)."""
    if not isinstance(rng, dict) or rng.get("bit_generator") != "PCG64":
        raise StateError(where, f"field 'rng' must be a PCG64 state, got {short(rng)}")
    inner = rng.get("state")
    if not isinstance(inner, dict) or set(inner) != {"state", "inc"}:
        raise StateError(where, f"field 'rng.state' must be {{state, inc}}, got {short(inner)}")
    for key in ("state", "inc"):
        check_int(where, f"rng.state.{key}", inner[key], 0, 2**128, err=StateError)
    check_int(where, "rng.has_uint32", rng.get("has_uint32"), 0, 2, err=StateError)
    check_int(where, "rng.uinteger", rng.get("uinteger"), 0, 2**32, err=StateError)


def check_iterable_state(state: Any, mine: dict[str, Any]) -> dict[str, Any]:
    """An IterableTokenShards state, every field, against this dataset's own state `mine`
    (num_samples, world_size, rank, shuffle_buffer must match)."""
    where = "iterable state"
    state = _state_dict(state, where)
    _require(state, where, ("seed", "epoch", "num_samples", "workers"))
    if state.get("version", 1) != 1:
        raise StateError(
            where, f"field 'version' is {short(state['version'])}, this loader reads 1"
        )
    for key in ("num_samples", "world_size", "rank", "shuffle_buffer"):
        if state.get(key) != mine[key] or isinstance(state.get(key), bool):
            raise StateError(
                where,
                f"has {key}={short(state.get(key))}, this dataset {mine[key]}: the iterable mode "
                "resumes with the same data, world size, rank and buffer",
            )
    check_seed(where, state["seed"], StateError)
    check_int(where, "epoch", state["epoch"], 0, err=StateError)
    workers = state["workers"]
    if workers is None:
        return state
    if not isinstance(workers, list) or not workers:
        raise StateError(
            where, f"field 'workers' must be null or a non-empty list, got {short(workers)}"
        )
    check_int(where, "next_worker", state.get("next_worker", 0), 0, len(workers), err=StateError)
    n, size = mine["num_samples"], max(int(mine["shuffle_buffer"]), 1)
    per_rank = -(-n // mine["world_size"])  # ceil(N / P): what each rank reads
    per_worker = -(-per_rank // len(workers))  # the most one worker's stream holds
    for w, s in enumerate(workers):
        at = f"{where} workers[{w}]"
        if not isinstance(s, dict):
            raise StateError(at, f"must be a dict, got {type(s).__name__}")
        _require(s, at, ("cursor", "rng", "buffer", "emitted", "done"))
        cursor = check_int(at, "cursor", s["cursor"], 0, per_worker + 1, err=StateError)
        _check_rng(at, s["rng"])
        buf = s["buffer"]
        if not isinstance(buf, list) or len(buf) > size:
            raise StateError(at, f"field 'buffer' must be a list of at most {size} indices")
        for i, v in enumerate(buf):
            check_int(at, f"buffer[{i}]", v, 0, n, err=StateError)
        emitted = check_int(at, "emitted", s["emitted"], 0, err=StateError)
        if emitted + len(buf) != cursor:
            raise StateError(
                at,
                f"emitted {emitted} + buffered {len(buf)} != cursor {cursor}: "
                "not a state this loader wrote",
            )
        _check_type(at, "done", s["done"], bool, "true or false", StateError)
    return state

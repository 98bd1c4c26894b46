"""Property-based fuzzing of the files and states a user can hand the loader (issue 28, must
deliver 5): a shard folder (its metadata.json and its .npz bytes) and loader states. Any bytes
or any JSON give a result or one DataError, never another exception."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import JSON, mutated
from pipeline.errors import DataError
from pipeline.loader import GlobalSampler, ShardedTokenDataset
from pipeline.shards import npz_fields, npz_member

from .conftest import write_shards

FUZZ = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
SIZES = [6, 6, 3]


def _folder(tmp: str, compressed: bool = False) -> Path:
    return write_shards(Path(tmp) / "train", SIZES, seq_len=4, compressed=compressed)


def _read_all(folder: Path) -> None:
    """What a trainer does with a folder: open it, then read every sample in one batch."""
    try:
        ds = ShardedTokenDataset(folder)
        batch = ds.get_batch(np.arange(len(ds)))
        assert all(len(v) == len(ds) for v in batch.values())
        if len(ds):
            ds[len(ds) - 1]
    except DataError:
        pass


@pytest.fixture(scope="module")
def good_metadata(tmp_path_factory) -> dict:
    return json.loads((_folder(str(tmp_path_factory.mktemp("m"))) / "metadata.json").read_text())


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[bool, Path]:
    """One shard folder per storage (stored, deflated); each example puts back what it broke."""
    return {c: _folder(str(tmp_path_factory.mktemp("f")), c) for c in (False, True)}


def _with(path: Path, raw: bytes) -> None:
    """Read the folder of `path` with `raw` as that file's bytes, then restore the file."""
    before = path.read_bytes()
    path.write_bytes(raw)
    try:
        _read_all(path.parent)
        if path.suffix == ".npz":
            for read in (npz_fields, lambda p: np.asarray(npz_member(p, "input_ids"))):
                try:
                    read(path)  # what `pipeline shuffle` and `export --shards` read
                except DataError:
                    pass
    finally:
        path.write_bytes(before)


@FUZZ
@given(data=st.data())
def test_fuzzed_metadata_gives_a_result_or_one_data_error(folders, good_metadata, data):
    meta = data.draw(mutated(good_metadata) | JSON)
    _with(folders[False] / "metadata.json", json.dumps(meta).encode())


@FUZZ
@given(raw=st.binary(max_size=300))
def test_any_bytes_as_metadata_give_a_result_or_one_data_error(folders, raw):
    _with(folders[False] / "metadata.json", raw)


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """`data` with some bytes changed, a slice cut out, or the end cut off."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "truncate", "insert"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[at : at + draw(st.integers(1, 64))]
        elif kind == "truncate":
            del out[at:]
        else:
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(out)


@pytest.fixture(scope="module")
def shard_bytes(tmp_path_factory) -> dict[bool, bytes]:
    """The first shard's bytes, stored and deflated."""
    out = {}
    for compressed in (False, True):
        folder = _folder(str(tmp_path_factory.mktemp("s")), compressed)
        out[compressed] = (folder / "shard_000000.npz").read_bytes()
    return out


@FUZZ
@given(data=st.data(), compressed=st.booleans())
def test_damaged_shard_files_give_a_result_or_one_data_error(
    folders, shard_bytes, data, compressed
):
    raw = data.draw(damaged(shard_bytes[compressed]) | st.binary(max_size=200))
    _with(folders[compressed] / "shard_000000.npz", raw)


def _sampler() -> GlobalSampler:
    return GlobalSampler(15, 4, shard_sizes=SIZES, order="shard_block", seed=3)


@FUZZ
@given(data=st.data())
def test_fuzzed_sampler_states_give_a_result_or_one_data_error(data):
    s = _sampler()
    next(iter(s))
    state = data.draw(mutated(s.state_dict()) | JSON)
    fresh = _sampler()
    try:
        fresh.load_state_dict(state)
    except DataError:
        return
    for _, idx in zip(range(5), fresh, strict=False):  # a loaded state iterates
        assert ((0 <= idx) & (idx < 15)).all()


@pytest.fixture(scope="module")
def iterable_state(tmp_path_factory):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from pipeline.loader import IterableTokenShards

    folder = _folder(str(tmp_path_factory.mktemp("i")))
    ds = IterableTokenShards(folder, seed=1, shuffle_buffer=3)
    next(ds.track(DataLoader(ds, batch_size=2, num_workers=0)))
    return folder, json.loads(json.dumps(ds.state_dict()))


@FUZZ
@given(data=st.data())
def test_fuzzed_iterable_states_give_a_result_or_one_data_error(iterable_state, data):
    from torch.utils.data import DataLoader

    from pipeline.loader import IterableTokenShards

    folder, good = iterable_state
    state = data.draw(mutated(good) | JSON)
    ds = IterableTokenShards(folder, seed=1, shuffle_buffer=3)
    try:
        ds.load_state_dict(state)
        for batch in ds.track(DataLoader(ds, batch_size=2, num_workers=0)):
            assert ((batch["index"] >= 0) & (batch["index"] < 15)).all()
    except DataError:
        pass


def test_the_fuzz_inputs_reach_past_the_first_check(good_metadata, shard_bytes):
    """Sanity of the strategies: the untouched inputs load (so mutations start from valid)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = _folder(tmp)
        (folder / "metadata.json").write_text(json.dumps(good_metadata))
        assert len(ShardedTokenDataset(folder)) == sum(SIZES)
    arr = np.load(io.BytesIO(shard_bytes[True]))["input_ids"]
    assert arr.shape == (6, 4)

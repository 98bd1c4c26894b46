"""The loader's inputs are checked by one schema each (pipeline.loader.schema): a bad
metadata.json or state is one DataError naming the file (or state) and the field, at open or at
load_state_dict, never later (issue 28, defects 8 and 9)."""

from __future__ import annotations

import json
import re

import pytest

from pipeline.cli import main
from pipeline.errors import DataError
from pipeline.loader import GlobalSampler, ShardedTokenDataset

from .conftest import write_shards


def _edit(folder, change) -> None:
    path = folder / "metadata.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "change, field, expected",
    [
        (lambda m: m.update(seq_len="abc"), "seq_len", "an integer >= 1, got 'abc'"),
        (lambda m: m.update(seq_len=[512]), "seq_len", r"an integer >= 1, got \[512\]"),
        (lambda m: m["shards"][0].update(num_samples="x"), "shards[0].num_samples", "'x'"),
        (lambda m: m["shards"][0].update(file=123), "shards[0].file", "a file name, got 123"),
        (
            lambda m: m["shards"][0].update(file="../outside/x.npz"),
            "shards[0].file",
            "name a file inside the folder, got '../outside/x.npz'",
        ),
        (lambda m: m["shards"][1].update(file="/etc/passwd"), "shards[1].file", "inside the"),
        (lambda m: m.update(field_dtypes={"input_ids": "object"}), "field_dtypes.input_ids", ""),
        (lambda m: m.update(shard_sizes="30"), "shard_sizes", "a list of integers"),
        (lambda m: m.update(pad_id=-1), "pad_id", "an integer >= 0, got -1"),
    ],
)
def test_bad_metadata_is_one_line_naming_file_and_field(tmp_path, capsys, change, field, expected):
    """The issue's cases gave a raw ValueError or TypeError, or read a file outside the folder."""
    folder = write_shards(tmp_path / "train", [30, 30])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.npz").write_bytes((folder / "shard_000000.npz").read_bytes())
    _edit(folder, change)
    want = re.escape(f"{folder / 'metadata.json'}: field '{field}' ") + f".*{expected}"
    with pytest.raises(DataError, match=want):
        ShardedTokenDataset(folder)
    capsys.readouterr()
    assert main(["bench", "--shards", str(folder), "--steps", "1", "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {folder / 'metadata.json'}: field '{field}'") and "\n" not in err


def test_a_listed_file_twice_is_refused(tmp_path):
    folder = write_shards(tmp_path / "train", [30, 30])
    _edit(folder, lambda m: m["shards"][1].update(file="shard_000000.npz"))
    with pytest.raises(DataError, match=r"'shards\[1\].file': 'shard_000000.npz' is listed twice"):
        ShardedTokenDataset(folder)


def _sampler(**kw) -> GlobalSampler:
    return GlobalSampler(40, 4, shard_sizes=[10, 10, 10, 10], **kw)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"window_shards": 0}, r"field 'window_shards' must be an integer >= 1, got 0"),
        ({"window_shards": -3}, r"field 'window_shards' must be an integer >= 1, got -3"),
        ({"seed": 2**80}, r"field 'seed' must be an integer that fits in 64 bits"),
        ({"seed": "1"}, r"field 'seed' must be an integer"),
        ({"seed": True}, r"field 'seed' must be an integer"),
        ({"epoch": -1}, r"field 'epoch' must be an integer >= 0"),
        ({"cursor": 41}, r"field 'cursor' must be an integer in \[0, 41\)"),
        ({"cursor": 2.5}, r"field 'cursor' must be an integer"),
        ({"padded": -1}, r"field 'padded' must be an integer >= 0"),
        ({"order": ["global"]}, r"field 'order' must be one of global, sequential"),
        ({"version": 2}, r"field 'version' is 2, this loader reads 1"),
        ({"num_samples": "40"}, r"field 'num_samples' must be an integer"),
    ],
)
def test_a_bad_sampler_state_fails_at_load_state_dict(change, message):
    """window_shards 0 raised at iteration; seed 2**80 silently gave seed 0's order."""
    s = _sampler(order="shard_block", seed=5)
    next(iter(s))
    state = {**s.state_dict(), **change}
    fresh = _sampler()
    before = fresh.state_dict()
    with pytest.raises(DataError, match=rf"^sampler state: {message}"):
        fresh.load_state_dict(state)
    with pytest.raises(ValueError):  # what callers caught before the schema
        fresh.load_state_dict(state)
    assert fresh.state_dict() == before  # nothing of the bad state was taken


def test_the_constructor_and_the_state_agree_on_seeds():
    for seed in (-(2**63), 2**64 - 1):
        s = _sampler(seed=seed)
        _sampler().load_state_dict(s.state_dict())
    with pytest.raises(ValueError, match="seed must fit in 64 bits"):
        _sampler(seed=2**80)


@pytest.fixture
def iterable_state(tmp_path):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from pipeline.loader import IterableTokenShards

    folder = write_shards(tmp_path / "train", [10, 10])
    ds = IterableTokenShards(folder, seed=1, shuffle_buffer=4)
    it = ds.track(DataLoader(ds, batch_size=3, num_workers=0))
    next(it)
    return folder, json.loads(json.dumps(ds.state_dict()))


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda s: s["workers"][0]["buffer"].__setitem__(0, -1),
            r"buffer\[0\]' must be an integer in \[0, 20\)",
        ),
        (lambda s: s["workers"][0]["buffer"].__setitem__(1, 20), r"buffer\[1\]' must be"),
        (lambda s: s["workers"][0].update(cursor=2), r"emitted 3 \+ buffered 4 != cursor 2"),
        (lambda s: s["workers"][0].update(rng={"bit_generator": "MT19937"}), r"'rng' must be"),
        (lambda s: s["workers"][0]["rng"]["state"].update(inc=-1), r"'rng.state.inc' must be"),
        (lambda s: s.update(next_worker=1), r"field 'next_worker' must be an integer in \[0, 1\)"),
        (lambda s: s.update(seed=2**80), r"field 'seed' must be an integer that fits in 64"),
        (lambda s: s.update(workers={}), r"field 'workers' must be null or a non-empty list"),
        (lambda s: s.update(world_size=True), r"has world_size=True, this dataset 1"),
    ],
)
def test_a_bad_iterable_state_fails_at_load_state_dict(iterable_state, edit, message):
    """A buffer holding -1 used to serve the last sample."""
    from pipeline.loader import IterableTokenShards

    folder, state = iterable_state
    edit(state)
    with pytest.raises(DataError, match=rf"^iterable state.*{message}"):
        IterableTokenShards(folder, seed=1, shuffle_buffer=4).load_state_dict(state)


def test_a_good_iterable_state_still_loads(iterable_state):
    from pipeline.loader import IterableTokenShards

    folder, state = iterable_state
    ds = IterableTokenShards(folder, seed=1, shuffle_buffer=4)
    ds.load_state_dict(state)
    assert ds.state_dict()["workers"] == state["workers"]

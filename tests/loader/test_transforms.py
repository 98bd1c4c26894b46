"""Seeded transforms: windows, views, masks, document dropout, presets, eval never augmented."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.loader import ShardedTokenDataset
from pipeline.loader.step import StepDataset
from pipeline.loader.transforms import (
    PRESETS,
    Augment,
    Crop,
    SegmentDropout,
    TokenMask,
    crop,
    get_preset,
    renumber_segments,
    segment_dropout,
    split_of,
    token_mask,
    transform_rng,
)

from .conftest import write_shards

PAD = 65535
L = 32


def make_batch(b: int = 6, seq_len: int = L) -> dict[str, np.ndarray]:
    """input_ids = 1000·row + position + 1 (so a token names its row and position); documents of
    row % 4 + 3 tokens; no padding."""
    r = np.arange(b)[:, None]
    j = np.arange(seq_len)[None, :]
    ids = (1000 * r + j + 1).astype(np.uint16)
    seg = (j // (r % 4 + 3) + 1).astype(np.uint16)
    return {"input_ids": ids, "segment_ids": seg}


def source_of(tok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = tok.astype(np.int64) - 1
    return t // 1000, t % 1000


def check_segments(out, base):
    """Segment ids run 1..k per row; one new segment = one piece of one source document (tokens
    masked to PAD inside a document are skipped)."""
    for ids, seg in zip(out["input_ids"], out["segment_ids"], strict=True):
        real = seg != 0
        assert (ids[~real] == PAD).all()
        ks = seg[real]
        assert ks[0] == 1 and (np.diff(ks.astype(int)) >= 0).all()
        assert set(ks) == set(range(1, int(ks.max()) + 1))
        for k in set(ks):
            rows, pos = source_of(ids[(seg == k) & (ids != PAD)])
            assert len(set(rows)) == 1
            assert len(set(base["segment_ids"][rows[0], pos])) == 1  # one source document


@pytest.mark.parametrize("window", ["tail", "random_tail", "rolling"])
def test_crop_windows(window):
    base = make_batch()
    out = crop(base, transform_rng(1, 0, 5, 0), window=window, min_len=8, pad_id=PAD)
    assert out["input_ids"].shape == base["input_ids"].shape
    for i, ids in enumerate(out["input_ids"]):
        n = int((ids != PAD).sum())
        rows, pos = source_of(ids[:n])
        assert (rows == i).all() and n >= 8  # views_per_row 1 keeps the row order
        if window == "rolling":
            shift = pos[0]
            assert n == L and 8 <= shift <= L - 8
            assert (pos == (shift + np.arange(L)) % L).all()
        else:
            assert (np.diff(pos) == 1).all()  # one contiguous window, left-aligned
            if window == "tail":
                assert pos[-1] == L - 1
    check_segments(out, base)


def test_rolling_wrap_starts_a_new_segment():
    base = make_batch(1)
    base["segment_ids"][:] = 1  # one document filling the row
    out = crop(base, transform_rng(0, 0, 0, 0), window="rolling", min_len=4, pad_id=PAD)
    seg = out["segment_ids"][0]
    assert set(seg) == {1, 2}  # the tail of the document, then its head after the wrap


def test_views_resampled_back_to_b():
    base = make_batch(8)
    out = crop(base, transform_rng(3, 1, 2, 0), window="random_tail", views_per_row=3, pad_id=PAD)
    assert out["input_ids"].shape == (8, L)
    rows = source_of(out["input_ids"][:, 0])[0]
    assert np.bincount(rows, minlength=8).max() <= 3  # B views drawn from the 3·B, no repeat
    assert len(set(map(bytes, out["input_ids"]))) == 8
    check_segments(out, base)


def test_token_mask():
    base = make_batch(64, 64)
    base["segment_ids"][:, -4:] = 0  # padding is never masked
    keep = {k: v.copy() for k, v in base.items()}
    assert np.array_equal(token_mask(base, transform_rng(0, 0, 0, 1), probability=0.0,
                                     mask_id=7)["input_ids"], base["input_ids"])  # fmt: skip
    full = token_mask(base, transform_rng(0, 0, 0, 1), probability=1.0, mask_id=7)["input_ids"]
    assert (full[:, :-4] == 7).all() and np.array_equal(full[:, -4:], base["input_ids"][:, -4:])
    some = token_mask(base, transform_rng(0, 0, 0, 1), probability=0.3, mask_id=7)["input_ids"]
    rate = (some[:, :-4] == 7).mean()
    assert 0.27 < rate < 0.33  # 3840 tokens: sd of the rate ~0.0074
    assert all(np.array_equal(base[k], keep[k]) for k in base)  # input untouched


def test_segment_dropout():
    base = make_batch(40)
    none = segment_dropout(base, transform_rng(0, 0, 0, 2), probability=0.0, pad_id=PAD)
    assert all(np.array_equal(none[k], base[k]) for k in base)
    one = segment_dropout(base, transform_rng(0, 0, 0, 2), probability=1.0, pad_id=PAD)
    assert (one["segment_ids"].max(axis=1) == 1).all()  # every row keeps exactly one document
    half = segment_dropout(base, transform_rng(5, 0, 0, 2), probability=0.5, pad_id=PAD)
    kept = half["segment_ids"] != 0
    # kept tokens stay in place; the gap is padding; ids renumbered 1..k
    assert np.array_equal(half["input_ids"][kept], base["input_ids"][kept])
    assert (half["input_ids"][~kept] == PAD).all()
    check_segments(half, base)
    frac = 1 - kept.mean()
    assert 0.35 < frac < 0.65
    assert np.array_equal(renumber_segments(half["segment_ids"]), half["segment_ids"])


def test_augment_is_a_function_of_seed_epoch_step():
    base = make_batch()
    keep = {k: v.copy() for k, v in base.items()}
    aug = PRESETS["baseline_plus"].augment(pad_id=PAD)
    a = aug(base, epoch=1, step=4)
    b = Augment(aug.transforms, seed=42, pad_id=PAD)(base, epoch=1, step=4)
    c = aug(base, epoch=2, step=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["input_ids"], c["input_ids"])
    assert all(np.array_equal(base[k], keep[k]) for k in base)  # a cached batch stays intact
    check_segments(a, base)


def test_presets_as_specified():
    assert get_preset("baseline").cache_policy == "none"
    assert get_preset("baseline").augment() is None
    plus = get_preset("baseline_plus")
    assert (plus.cache_policy, plus.cache_batches, plus.seed) == ("opt", 512, 42)
    assert plus.transforms == (
        Crop(window="random_tail", min_len=8, views_per_row=2),
        TokenMask(probability=0.03),
        SegmentDropout(probability=0.03),
    )
    with pytest.raises(ValueError, match="preset must be one of"):
        get_preset("fancy")


def test_eval_is_never_augmented(tmp_path):
    with pytest.raises(ValueError, match="eval loaders are never augmented"):
        Augment([TokenMask(0.5)], seed=0, split="eval")
    folder = write_shards(tmp_path / "shard" / "eval", [20])
    ds = ShardedTokenDataset(folder)
    split = split_of(ds.path, ds.metadata)
    assert split == "eval" and split_of(tmp_path / "shard" / "train") == "train"
    augment = get_preset("baseline_plus").augment(pad_id=0, split=split)
    assert augment is None
    steps = StepDataset(ds, 4, seed=0, augment=augment)
    assert np.array_equal(steps[2]["input_ids"], ds.get_batch(steps.indices(2))["input_ids"])


def test_bad_transform_settings():
    with pytest.raises(ValueError, match="crop window must be one of"):
        Augment([Crop(window="middle")], seed=0)
    with pytest.raises(ValueError, match="probability must be in"):
        Augment([TokenMask(1.5)], seed=0)

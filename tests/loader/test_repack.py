"""RepackingDataset: per-epoch re-packing of the tokenize stage's documents."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import EOS, PAD, fake_tokenize
from pipeline.errors import DataError
from pipeline.loader import GlobalSampler, RepackingDataset

SEQ = 64


@pytest.fixture
def run_dir(tmp_path):
    rng = np.random.default_rng(3)
    parts = [rng.integers(3, 60, 60).tolist() for _ in range(3)] + [[150, 5]]  # 150 > SEQ: cut
    fake_tokenize(tmp_path, parts)
    return tmp_path


def doc_pieces(ds: RepackingDataset) -> tuple[dict[int, int], set[frozenset[int]]]:
    """(tokens seen per document, the neighbour set of every sequence) over one epoch, read
    through get_batch and checked against the documents' own tokens."""
    seen: dict[int, int] = {}
    groups = set()
    batch = ds.get_batch(np.arange(len(ds)))
    for i in range(len(ds)):
        docs = ds.sequence_docs(i).tolist()
        groups.add(frozenset(docs))
        ids, seg = batch["input_ids"][i], batch["segment_ids"][i]
        assert (ids[seg == 0] == PAD).all()
        assert seg.max() == len(docs) and np.all(np.diff(seg[seg > 0].astype(int)) >= 0)
        b = int(ds.bin_order[i])
        offsets = ds.packing.item_offset[ds._bin_starts[b] : ds._bin_starts[b + 1]]
        for k, (d, at) in enumerate(zip(docs, offsets.tolist(), strict=True), start=1):
            piece = ids[seg == k]
            whole = ds._tokens(int(ds.doc_starts[d]), int(ds.doc_lengths[d]))
            assert np.array_equal(piece, whole[at : at + len(piece)])
            seen[d] = seen.get(d, 0) + len(piece)
    return seen, groups


@pytest.mark.parametrize("method,window", [("bfd", None), ("bfd", 100), ("concat", None)])
def test_each_document_once_per_epoch_and_neighbours_change(run_dir, method, window):
    ds = RepackingDataset(run_dir, SEQ, seed=7, epoch=0, method=method, window_docs=window)
    assert ds.num_docs == 182
    seen0, groups0 = doc_pieces(ds)
    ds.set_epoch(1)
    seen1, groups1 = doc_pieces(ds)
    want = {d: int(n) for d, n in enumerate(ds.doc_lengths)}
    assert seen0 == want and seen1 == want  # every token of every document, once per epoch
    assert len(groups0 & groups1) < len(groups0) // 2  # most sequences have new neighbours
    if method == "bfd":  # only the 150-token document is cut (into 64 + 64 + 22)
        cut = {d for i in range(len(ds)) for d in ds.sequence_docs(i).tolist()}
        counts = np.bincount(ds.packing.item_doc, minlength=ds.num_docs)
        assert cut == set(range(ds.num_docs)) and np.flatnonzero(counts > 1).tolist() == [180]


def test_epoch_is_a_pure_function_of_seed_and_epoch(run_dir):
    a = RepackingDataset(run_dir, SEQ, seed=7, epoch=2)
    b = RepackingDataset(run_dir, SEQ, seed=7, epoch=0)
    b.set_epoch(2)
    idx = np.arange(len(a))
    assert np.array_equal(a.get_batch(idx)["input_ids"], b.get_batch(idx)["input_ids"])
    c = RepackingDataset(run_dir, SEQ, seed=8, epoch=2)
    assert not np.array_equal(
        a.get_batch(idx[:20])["input_ids"], c.get_batch(idx[:20])["input_ids"]
    )


def test_resume_from_state_is_exact(run_dir):
    ds = RepackingDataset(run_dir, SEQ, seed=1, epoch=0, method="concat")
    full = []
    while (b := ds.next_batch(16)) is not None:
        full.append(b["input_ids"])
    ds.set_epoch(1)
    full.append(ds.next_batch(16)["input_ids"])
    ds2 = RepackingDataset(run_dir, SEQ, seed=1, epoch=0, method="concat")
    got = [ds2.next_batch(16)["input_ids"] for _ in range(3)]
    state = ds2.state_dict()
    assert {k: state[k] for k in ("seed", "epoch", "cursor")} == {
        "seed": 1,
        "epoch": 0,
        "cursor": 48,
    }
    ds3 = RepackingDataset(run_dir, SEQ, seed=99, epoch=5, method="concat")
    ds3.load_state_dict(state)
    while (b := ds3.next_batch(16)) is not None:
        got.append(b["input_ids"])
    ds3.set_epoch(1)
    got.append(ds3.next_batch(16)["input_ids"])
    assert len(got) == len(full) and all(
        np.array_equal(x, y) for x, y in zip(got, full, strict=True)
    )
    with pytest.raises(ValueError, match="method='concat', this dataset 'bfd'"):
        RepackingDataset(run_dir, SEQ, seed=1).load_state_dict(state)


def test_global_sampler_over_a_repacked_epoch(run_dir):
    ds = RepackingDataset(run_dir, SEQ, seed=4, epoch=1)
    sampler = GlobalSampler(ds, 8, seed=4, world_size=2, rank=1, drop_last=True)
    assert sampler.order == "sequential"  # the sequences are in a seeded order already
    idx = np.concatenate(list(sampler))
    assert np.array_equal(idx, np.arange(1, len(ds), 2)[: len(idx)])
    assert ds.get_batch(idx[:8])["input_ids"].shape == (8, SEQ)


def test_bad_folders_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="meta.json: missing: run the tokenize stage first"):
        RepackingDataset(tmp_path, SEQ, seed=0)
    fake_tokenize(tmp_path, [[5, 6]])
    np.save(tmp_path / "tokenize" / "part-00000.tokens.npy", np.array([5, 6, 7], np.uint16))
    with pytest.raises(DataError, match=f"does not end with EOS {EOS}"):
        RepackingDataset(tmp_path, SEQ, seed=0)

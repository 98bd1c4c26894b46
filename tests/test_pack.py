"""pack: algorithm invariants (pipeline.packing) and the stage on a synthetic tokenize output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import DataError, RecipeError
from pipeline.executor import Executor
from pipeline.io import part_name, read_table, sha256_file, write_table
from pipeline.packing import (
    best_fit_decreasing_reference,
    bfd_bins,
    chunk,
    concat_docs_split,
    first_fit_bins,
    lower_bound,
    pack_bfd,
    pack_concat,
    pack_naive,
)
from pipeline.recipe import build_config
from pipeline.stage import StageContext
from pipeline.stages.pack import PackConfig
from pipeline.stages.pack import run as pack_run

EOS, PAD = 1, 0


# ---------------------------------------------------------------- helpers (shard tests use them)


def fake_tokenize(
    run_dir: Path,
    docs_per_part: list[list[int]],
    sources=None,
    seed: int = 0,
    dtype: str = "uint16",
) -> list[Path]:
    """Write run_dir/tokenize like the tokenize stage: doc k of part i has the given length,
    tokens = random ids in [2, 1000) with EOS last. Returns the top-level part files, sorted."""
    out = run_dir / "tokenize"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files = []
    for i, lens in enumerate(docs_per_part):
        toks = []
        for n in lens:
            doc = rng.integers(2, 1000, n).astype(dtype)
            if n:
                doc[-1] = EOS
            toks.append(doc)
        arr = np.concatenate(toks) if toks else np.zeros(0, dtype)
        np.save(out / part_name(i, ".tokens.npy"), arr)
        src = [(sources or ["web"])[k % len(sources or ["web"])] for k in range(len(lens))]
        table = pa.table(
            {
                "id": [f"d{i}-{k}" for k in range(len(lens))],
                "source": src,
                "num_tokens": pa.array(lens, pa.int64()),
            }
        )
        write_table(out / part_name(i, ".docs.parquet"), table)
        files += [out / part_name(i, ".docs.parquet"), out / part_name(i, ".tokens.npy")]
    meta = {
        "vocab_size": 1000,
        "eos_id": EOS,
        "pad_id": PAD,
        "dtype": dtype,
        "tokenizer_sha256": "f" * 64,
        "special_tokens": {"<|endoftext|>": EOS},
    }
    (out / "meta.json").write_text(json.dumps(meta))
    return sorted(files)


def make_ctx(
    run_dir: Path,
    name: str,
    input_parts,
    upstream: str,
    workers: int = 1,
    seed: int = 11,
    recipe_seed: int = 5,
) -> StageContext:
    out = run_dir / f".tmp-{name}"
    out.mkdir(parents=True, exist_ok=True)
    return StageContext(
        name=name,
        run_dir=run_dir,
        out_dir=out,
        seed=seed,
        recipe_seed=recipe_seed,
        input_parts=list(input_parts),
        upstream=upstream,
        executor=Executor(workers),
        recipe=None,
        progress=False,
        log=logging.getLogger("test"),
    )


def run_pack(run_dir: Path, cfg: dict, workers: int = 1):
    """Run pack on run_dir/tokenize, move the output to run_dir/pack; returns the result."""
    inputs = sorted((run_dir / "tokenize").glob("part-*"))
    ctx = make_ctx(run_dir, "pack", inputs, "tokenize", workers)
    try:
        res = pack_run(build_config(PackConfig, cfg, "pack"), ctx)
    finally:
        ctx.executor.close()
    ctx.out_dir.rename(run_dir / "pack")
    return res


def load_pack(pack_dir: Path):
    ids = np.concatenate([np.load(p) for p in sorted(pack_dir.glob("part-*.input_ids.npy"))])
    seg = np.concatenate([np.load(p) for p in sorted(pack_dir.glob("part-*.segment_ids.npy"))])
    return ids, seg


def docs_of(run_dir: Path) -> list[np.ndarray]:
    """Every document's tokens, from the fake tokenize output, in part order."""
    out = []
    for t in sorted((run_dir / "tokenize").glob("*.tokens.npy")):
        lens = read_table(t.with_name(t.name.replace(".tokens.npy", ".docs.parquet")))
        toks = np.load(t)
        ends = np.cumsum(lens.column("num_tokens").to_numpy())
        out += np.split(toks, ends[:-1]) if len(ends) else []
    return out


# ---------------------------------------------------------------- algorithms


def check_packing(pk, lengths, seq_len):
    """No token lost or duplicated, items inside their sequence, segment ids 1..k per sequence."""
    lengths = np.asarray(lengths)
    cover = np.zeros(int(lengths.sum()), np.int64)
    starts = np.cumsum(lengths) - lengths
    for d, o, n in zip(pk.item_doc, pk.item_offset, pk.item_len, strict=True):
        cover[starts[d] + o : starts[d] + o + n] += 1
    assert (cover == 1).all()
    assert (pk.item_len >= 1).all() and (pk.item_len <= seq_len).all()
    assert (pk.item_pos + pk.item_len <= seq_len).all()
    for b in range(pk.num_bins):
        sel = pk.item_bin == b
        assert sel.any()
        assert list(pk.item_seg[sel]) == list(range(1, sel.sum() + 1))
        pos, ln = pk.item_pos[sel], pk.item_len[sel]
        assert pos[0] == 0 and (pos[1:] == (pos + ln)[:-1]).all()  # contiguous from 0


def test_chunk_worked_example():
    """5000 tokens at seq_len 2048 -> 2048 + 2048 + 904; an empty document gives no chunk."""
    doc, off, ln = chunk(np.array([5000, 0, 7]), 2048)
    assert doc.tolist() == [0, 0, 0, 2]
    assert off.tolist() == [0, 2048, 4096, 0]
    assert ln.tolist() == [2048, 2048, 904, 7]


def test_bfd_worked_example():
    """Capacity 10, sizes 6 5 4 3 2: 6->A(4 left), 5->B(5), 4->A (tightest, 0), 3->B(2), 2->B(0)."""
    bins, n, _ = bfd_bins(np.array([3, 6, 2, 5, 4]), 10)
    assert n == 2
    assert bins.tolist() == [1, 0, 1, 1, 0]


def test_bfd_first_fit_counterexample_is_documented():
    """BFD is not always <= first-fit in arrival order: 3,2,2,3,2,2 at 7 fits 2 bins online."""
    sizes = [3, 2, 2, 3, 2, 2]
    assert first_fit_bins(sizes, 7) == 2
    assert bfd_bins(np.array(sizes), 7)[1] == 3 == best_fit_decreasing_reference(sizes, 7)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(2, 40).flatmap(
        lambda cap: st.tuples(st.just(cap), st.lists(st.integers(1, cap), max_size=80))
    )
)
def test_bfd_matches_textbook_bfd(case):
    cap, sizes = case
    bins, n, _ = bfd_bins(np.array(sizes, np.int64), cap)
    assert n == best_fit_decreasing_reference(sizes, cap)
    if sizes:
        assert np.bincount(bins, weights=sizes).max() <= cap
        assert set(bins.tolist()) == set(range(n))


def test_bfd_never_worse_than_first_fit_on_realistic_lengths():
    rng = np.random.default_rng(0)
    for seq_len in (64, 512):
        for _ in range(20):
            lens = np.maximum(1, rng.lognormal(np.log(seq_len / 4), 1.0, 300).astype(np.int64))
            _, _, sizes = chunk(lens, seq_len)
            bfd = bfd_bins(sizes, seq_len)[1]
            assert bfd <= first_fit_bins(sizes.tolist(), seq_len)
            assert bfd >= lower_bound(sizes, seq_len)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 70), max_size=40), st.sampled_from([8, 16, 32]))
def test_packing_invariants_all_strategies(lengths, seq_len):
    order = np.random.default_rng(len(lengths)).permutation(len(lengths))
    for pk in (
        pack_naive(lengths, seq_len),
        pack_concat(lengths, seq_len, order),
        pack_bfd(lengths, seq_len),
    ):
        check_packing(pk, lengths, seq_len)
    assert pack_bfd(lengths, seq_len).num_bins <= pack_naive(lengths, seq_len).num_bins
    assert pack_concat(lengths, seq_len, order).num_bins == lower_bound(lengths, seq_len)
    assert pack_concat(lengths, seq_len, order).docs_split() == concat_docs_split(
        lengths, seq_len, order
    )


def test_bfd_cuts_only_long_documents():
    """Chunks 32 32 32 31 30 12 9 8 5 4 (195 tokens): three full bins, 31 | 30 | 12+9+8 | 5+4,
    7 bins = ceil(195 / 32), and only the 100-token document is cut (32+32+32+4)."""
    lens = [30, 5, 12, 8, 9, 31, 100]
    pk = pack_bfd(lens, 32)
    assert pk.docs_split() == 1
    assert pk.num_bins == lower_bound(lens, 32) == 7
    assert sorted(pk.item_len[pk.item_bin == 5].tolist()) == [8, 9, 12]


# ---------------------------------------------------------------- the stage


def test_stage_conserves_tokens_and_writes_layout(tmp_path):
    rng = np.random.default_rng(1)
    parts = [rng.integers(1, 90, 40).tolist() for _ in range(3)]
    fake_tokenize(tmp_path, parts, sources=["web", "code"])
    res = run_pack(tmp_path, {"seq_len": 64, "sequences_per_part": 10})
    ids, seg = load_pack(tmp_path / "pack")
    assert ids.shape[1] == 64 and ids.dtype == np.uint16 and seg.dtype == np.uint16
    assert res.stats["sequences"] == len(ids)
    # every document's tokens appear once, contiguous runs per segment
    pieces = []
    for row_ids, row_seg in zip(ids, seg, strict=True):
        assert (row_ids[row_seg == 0] == PAD).all()
        k = row_seg.max()
        assert sorted(set(row_seg[row_seg > 0].tolist())) == list(range(1, k + 1))
        assert (np.diff(row_seg[row_seg > 0].astype(int)) >= 0).all()
        pieces += [row_ids[row_seg == s] for s in range(1, k + 1)]
    got = np.sort(np.concatenate(pieces))
    want = np.sort(np.concatenate(docs_of(tmp_path)))
    assert np.array_equal(got, want)
    assert res.stats["docs_in"] == 120 and res.stats["tokens_out"] == int(want.size)
    assert res.stats["padding_tokens"] == ids.size - want.size
    meta = json.loads((tmp_path / "pack" / "meta.json").read_text())
    assert meta["seq_len"] == 64 and meta["pad_id"] == PAD and meta["num_sequences"] == len(ids)
    seqs = read_table(tmp_path / "pack" / "part-00000.seqs.parquet")
    assert seqs.column_names == ["source", "num_segments", "num_tokens"]


def test_by_source_gives_single_source_sequences(tmp_path):
    fake_tokenize(tmp_path, [[20] * 30], sources=["a", "b", "c"])
    res = run_pack(tmp_path, {"seq_len": 50})
    assert res.stats["sequences_per_source"] == {"a": 5, "b": 5, "c": 5}  # 10 docs of 20 -> 5 x 40


def test_strategies_report_truncations_and_padding(tmp_path):
    rng = np.random.default_rng(2)
    lens = np.maximum(2, rng.lognormal(np.log(60), 0.8, 300).astype(int)).tolist()
    stats = {}
    for strategy in ("naive", "concat", "bfd"):
        run_dir = tmp_path / strategy
        fake_tokenize(run_dir, [lens[:150], lens[150:]])
        stats[strategy] = run_pack(run_dir, {"seq_len": 128, "strategy": strategy}).stats
    assert stats["concat"]["sequences"] == stats["concat"]["lower_bound_sequences"]
    assert stats["bfd"]["docs_split"] == stats["bfd"]["docs_longer_than_seq_len"]
    assert stats["bfd"]["truncations_avoided_vs_concat"] > 0
    assert stats["concat"]["truncations_avoided_vs_concat"] == 0
    assert stats["naive"]["sequences"] >= stats["bfd"]["sequences"] >= stats["concat"]["sequences"]
    assert stats["bfd"]["padding_pct"] < 5 < stats["naive"]["padding_pct"]


def test_deterministic_and_same_bytes_for_two_workers(tmp_path):
    rng = np.random.default_rng(3)
    parts = [rng.integers(1, 200, 60).tolist() for _ in range(4)]
    hashes = []
    for workers, strategy in ((1, "concat"), (2, "concat"), (1, "bfd"), (2, "bfd")):
        run_dir = tmp_path / f"{strategy}{workers}"
        fake_tokenize(run_dir, parts)
        run_pack(run_dir, {"seq_len": 128, "strategy": strategy, "sequences_per_part": 16}, workers)
        hashes.append({p.name: sha256_file(p) for p in sorted((run_dir / "pack").iterdir())})
    assert hashes[0] == hashes[1] and hashes[2] == hashes[3]
    assert hashes[0] != hashes[2]


def test_uint32_tokens_kept(tmp_path):
    fake_tokenize(tmp_path, [[5, 9, 3]], dtype="uint32")
    run_pack(tmp_path, {"seq_len": 8})
    ids, _ = load_pack(tmp_path / "pack")
    assert ids.dtype == np.uint32


def test_bad_inputs_raise(tmp_path):
    fake_tokenize(tmp_path, [[5, 9]])
    docs = tmp_path / "tokenize" / "part-00000.docs.parquet"
    write_table(
        docs,
        pa.table(
            {"id": ["a", "b"], "source": ["w", "w"], "num_tokens": pa.array([5, 8], pa.int64())}
        ),
    )
    with pytest.raises(
        DataError, match="sum\\(num_tokens\\) = 13 but part-00000.tokens.npy holds 14"
    ):
        run_pack(tmp_path, {"seq_len": 8})
    (tmp_path / "tokenize" / "part-00000.tokens.npy").unlink()
    with pytest.raises(DataError, match="tokens.npy: missing"):
        run_pack(tmp_path, {"seq_len": 8})
    fake_tokenize(tmp_path, [[5, 9]], dtype="uint32")
    (tmp_path / "tokenize" / "meta.json").write_text(json.dumps({"eos_id": 1, "dtype": "uint16"}))
    with pytest.raises(DataError, match="expected a 1-D uint16 array, got 1-D uint32"):
        run_pack(tmp_path, {"seq_len": 8})
    (tmp_path / "tokenize" / "meta.json").unlink()
    with pytest.raises(DataError, match="pack needs tokenize's meta.json"):
        run_pack(tmp_path, {"seq_len": 8})
    ctx = make_ctx(tmp_path, "pack2", [], "quality")
    with pytest.raises(RecipeError, match="needs the tokenize stage"):
        pack_run(PackConfig(), ctx)


def test_recipe_errors():
    with pytest.raises(RecipeError, match="pack.strategy: got 'bestfit'"):
        build_config(PackConfig, {"strategy": "bestfit"}, "pack")
    with pytest.raises(RecipeError, match="pack.seq_len: must be in \\[2"):
        build_config(PackConfig, {"seq_len": 1}, "pack")


def test_by_source_false_mixes_sources(tmp_path):
    """Three 20-token documents from three sources at seq_len 64: 3 sequences by source, 1 mixed."""
    for by_source, want in ((True, 3), (False, 1)):
        run_dir = tmp_path / str(by_source)
        fake_tokenize(run_dir, [[20, 20, 20]], sources=["a", "b", "c"])
        res = run_pack(run_dir, {"seq_len": 64, "by_source": by_source})
        assert res.stats["sequences"] == want
        _, seg = load_pack(run_dir / "pack")
        assert seg.max() == 4 - want  # 1 segment each, or 3 in the one mixed sequence


def test_long_sequences_use_wide_dtypes_and_exact_bfd(tmp_path):
    """seq_len >= 65536: segment ids become uint32 and BFD sorts without the 16-bit radix path."""
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 70_000, 60)
    assert bfd_bins(sizes, 70_000)[1] == best_fit_decreasing_reference(sizes.tolist(), 70_000)
    fake_tokenize(tmp_path, [[10, 7]])
    res = run_pack(tmp_path, {"seq_len": 65_536})
    ids, seg = load_pack(tmp_path / "pack")
    assert seg.dtype == np.uint32 and ids.shape == (1, 65_536) and res.stats["sequences"] == 1

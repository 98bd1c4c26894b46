"""The pack stage on a synthetic tokenize output: layout, conservation, determinism, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from helpers import PAD, fake_tokenize, run_pack
from oracles import best_fit_decreasing_reference
from pipeline.errors import DataError, RecipeError
from pipeline.io import sha256_file
from pipeline.packing import bfd_bins, pack_bfd
from pipeline.parts import part_name, read_table, write_table
from pipeline.recipe import build_config
from pipeline.stages.pack import PackConfig

# ---------------------------------------------------------------- helpers


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


def test_stage_conserves_tokens_and_writes_layout(tmp_path):
    rng = np.random.default_rng(1)
    parts = [rng.integers(1, 90, 40).tolist() for _ in range(3)]
    fake_tokenize(tmp_path, parts, sources=["web", "code"])
    res = run_pack(tmp_path, {"seq_len": 64, "sequences_per_part": 10})
    ids, seg = load_pack(tmp_path / "pack")
    assert ids.shape[1] == 64 and ids.dtype == np.uint16 and seg.dtype == np.uint16
    assert res.all_stats()["sequences"] == len(ids)
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
    assert res.all_stats()["docs_in"] == 120 and res.all_stats()["tokens_out"] == int(want.size)
    assert res.all_stats()["padding_tokens"] == ids.size - want.size
    meta = json.loads((tmp_path / "pack" / "meta.json").read_text())
    assert meta["seq_len"] == 64 and meta["pad_id"] == PAD and meta["num_sequences"] == len(ids)
    seqs = read_table(tmp_path / "pack" / "part-00000.seqs.parquet")
    assert seqs.column_names == ["source", "num_segments", "num_tokens"]


def test_by_source_gives_single_source_sequences(tmp_path):
    fake_tokenize(tmp_path, [[20] * 30], sources=["a", "b", "c"])
    res = run_pack(tmp_path, {"seq_len": 50})
    assert res.all_stats()["sequences_per_source"] == {
        "a": 5,
        "b": 5,
        "c": 5,
    }  # 10 docs of 20 -> 5 x 40


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
    with pytest.raises(DataError, match="meta.json: missing from the tokenize stage's output"):
        run_pack(tmp_path, {"seq_len": 8})


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
        assert res.all_stats()["sequences"] == want
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
    assert seg.dtype == np.uint32 and ids.shape == (1, 65_536) and res.all_stats()["sequences"] == 1


def test_each_tokenize_part_is_opened_a_bounded_number_of_times(tmp_path, monkeypatch):
    """1,000 one-document parts into ~30 output parts: every input token file is opened by the
    length scan and by the output part(s) that take from it, never by all of them (the old cost
    was input parts x output parts opens)."""
    import collections

    import pipeline.stages.pack as pack_mod

    fake_tokenize(tmp_path, [[5 + i] for i in range(20)])
    tok = tmp_path / "tokenize"
    for i in range(20, 1000):  # copies of the 20 distinct parts: writing 1,000 is the slow bit
        for suffix in (".tokens.npy", ".docs.parquet"):
            src = tok / part_name(i % 20, suffix)
            (tok / part_name(i, suffix)).write_bytes(src.read_bytes())
    opens: collections.Counter = collections.Counter()
    real_load = np.load

    def counting_load(path, *args, **kwargs):
        opens[Path(path).name] += 1
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(pack_mod.np, "load", counting_load)
    res = run_pack(tmp_path, {"seq_len": 64, "sequences_per_part": 8, "by_source": False})
    num_jobs = -(-res.all_stats()["sequences"] // 8)
    assert num_jobs > 20  # many output parts indeed
    assert len(opens) == 1000  # every part read ...
    assert max(opens.values()) <= 3  # ... by the scan and the one or two parts it lands in
    assert sum(opens.values()) <= 2 * 1000 + num_jobs


def _shas(pack_dir: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(pack_dir.iterdir())}


@pytest.mark.parametrize("strategy", ["bfd", "concat", "naive"])
def test_windows_give_valid_deterministic_packs(tmp_path, strategy):
    """window_docs below the corpus: parts packed in windows of whole parts, each on its own;
    every token lands exactly once, output parts stay full across window boundaries, and the
    bytes do not depend on the worker count."""
    rng = np.random.default_rng(7)
    parts = [rng.integers(1, 150, 30).tolist() for _ in range(5)]  # some longer than seq_len
    shas = []
    for workers in (1, 2) if strategy == "bfd" else (1,):  # a pool costs seconds: once is enough
        run = tmp_path / f"w{workers}"
        fake_tokenize(run, parts, sources=["web", "code"])
        cfg = {"seq_len": 64, "sequences_per_part": 7, "window_docs": 70, "strategy": strategy}
        res = run_pack(run, cfg, workers=workers)
        shas.append(_shas(run / "pack"))
    st = res.all_stats()
    assert st["windows"] == 3  # parts {0, 1}, {2, 3}, {4}
    ids, seg = load_pack(run / "pack")
    assert ids.shape == (st["sequences"], 64)
    pieces = [
        row_ids[row_seg == k]
        for row_ids, row_seg in zip(ids, seg, strict=True)
        for k in range(1, row_seg.max() + 1)
    ]
    assert np.array_equal(np.sort(np.concatenate(pieces)), np.sort(np.concatenate(docs_of(run))))
    assert st["tokens_out"] == int((seg > 0).sum())
    sizes = [len(np.load(p)) for p in sorted((run / "pack").glob("part-*.input_ids.npy"))]
    assert sizes[:-1] == [7] * (len(sizes) - 1) and 0 < sizes[-1] <= 7
    seqs = sorted((run / "pack").glob("*.seqs.parquet"))
    assert sum(read_table(p).num_rows for p in seqs) == st["sequences"]
    assert shas[0] == shas[-1]


def test_one_window_is_global_bfd_and_windows_are_bfd_per_window(tmp_path):
    rng = np.random.default_rng(3)
    parts = [rng.integers(1, 200, 40).tolist() for _ in range(4)]
    runs = {}
    for window in (160, 10**6, 40):
        run = tmp_path / f"w{window}"
        fake_tokenize(run, parts)
        cfg = {"seq_len": 128, "by_source": False, "window_docs": window}
        runs[window] = (run_pack(run, cfg).all_stats(), _shas(run / "pack"))
    assert runs[160] == runs[10**6]  # a window holding the whole corpus: the global packing
    flat = np.concatenate([np.asarray(p) for p in parts])
    assert runs[160][0]["sequences"] == pack_bfd(flat, 128).num_bins
    per_part = sum(pack_bfd(np.asarray(p), 128).num_bins for p in parts)
    assert runs[40][0]["windows"] == 4 and runs[40][0]["sequences"] == per_part
    assert per_part >= runs[160][0]["sequences"]  # windows cost a little fill

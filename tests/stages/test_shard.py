"""shard: subsample, eval split, permuted train shards, metadata and memory-mappable .npz."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import fake_tokenize, make_ctx, run_pack
from pipeline.errors import RecipeError
from pipeline.io import sha256_file
from pipeline.recipe import build_config
from pipeline.shards import npz_member
from pipeline.stages.shard import ShardConfig, select, split_eval, target_counts
from pipeline.stages.shard import run as shard_run


def packed_run(tmp_path, sources=("web",), n_docs=120, seq_len=32):
    rng = np.random.default_rng(4)
    lens = rng.integers(5, 60, n_docs).tolist()
    fake_tokenize(tmp_path, [lens[: n_docs // 2], lens[n_docs // 2 :]], sources=list(sources))
    run_pack(tmp_path, {"seq_len": seq_len, "sequences_per_part": 25})
    return tmp_path


def run_shard(run_dir, cfg, workers=1, recipe_seed=5):
    ctx = make_ctx(run_dir, "shard", "pack", workers, seed=recipe_seed)  # seed_scope="recipe"
    try:
        res = shard_run(build_config(ShardConfig, cfg, "shard"), ctx)
    finally:
        ctx.executor.close()
    out = run_dir / f"shard-{workers}-{recipe_seed}-{len(list(run_dir.glob('shard-*')))}"
    ctx.out_dir.rename(out)
    return res, out


def read_split(folder):
    meta = json.loads((folder / "metadata.json").read_text())
    ids = [np.load(folder / s["file"])["input_ids"] for s in meta["shards"]]
    seg = [np.load(folder / s["file"])["segment_ids"] for s in meta["shards"]]
    cat = lambda a: np.concatenate(a) if a else np.zeros((0, meta["seq_len"]))  # noqa: E731
    return meta, cat(ids), cat(seg)


def pack_rows(run_dir):
    ids = np.concatenate([np.load(p) for p in sorted((run_dir / "pack").glob("*.input_ids.npy"))])
    return ids


def test_target_counts_worked_examples():
    """Weights 3:1 for 8 samples -> 6 and 2; capped at availability; unlisted excluded."""
    assert target_counts({"a": 10, "b": 10}, 8, {"a": 3, "b": 1}) == {"a": 6, "b": 2}
    assert target_counts({"a": 4, "b": 10}, 8, {"a": 3, "b": 1}) == {"a": 4, "b": 4}
    assert target_counts({"a": 10, "b": 10, "c": 5}, 6, {"a": 1}) == {"a": 6, "b": 0, "c": 0}
    assert target_counts({"a": 30, "b": 10}, 20, None) == {"a": 15, "b": 5}


def test_target_counts_shrink_keeps_the_shares_when_a_source_is_short():
    """spread: a short source's shortfall goes to the others (the mix moves, the total holds);
    shrink: every source is cut to the short one's scale (the mix holds, the total falls)."""
    avail, weights = {"a": 30, "b": 10}, {"a": 1, "b": 1}
    assert target_counts(avail, 40, weights, "spread") == {"a": 30, "b": 10}
    assert target_counts(avail, 40, weights, "shrink") == {"a": 10, "b": 10}
    # 3:1 of 8 wants a = 6, but a has 4: the total shrinks to 4 * 4/3 -> 5 (largest remainder)
    assert target_counts({"a": 4, "b": 10}, 8, {"a": 3, "b": 1}, "shrink") == {"a": 4, "b": 1}
    # no source short: the same counts as spread; an unlisted source still gets nothing
    avail = {"a": 10, "b": 10, "c": 5}
    assert target_counts(avail, 8, {"a": 3, "b": 1}, "shrink") == {"a": 6, "b": 2, "c": 0}


def test_select_and_split_are_seeded_and_disjoint():
    sources = np.array(["a"] * 50 + ["b"] * 50, dtype=object)
    one = select(sources, {"a": 10, "b": 5}, np.random.default_rng(1))
    assert one.tolist() == select(sources, {"a": 10, "b": 5}, np.random.default_rng(1)).tolist()
    assert (sources[one] == "a").sum() == 10 and len(set(one.tolist())) == 15
    train, ev = split_eval(one, 0.2, np.random.default_rng(2))
    assert len(ev) == 3 and not set(train.tolist()) & set(ev.tolist())
    assert (np.diff(ev) > 0).all()


def test_shards_equal_the_permuted_input(tmp_path):
    run_dir = packed_run(tmp_path)
    res, out = run_shard(run_dir, {"shard_size": 7, "eval_fraction": 0.1})
    rows = pack_rows(run_dir)
    meta, ids, seg = read_split(out / "train")
    emeta, eids, _ = read_split(out / "eval")
    n = len(rows)
    assert meta["num_samples"] + emeta["num_samples"] == n == res.stats["sequences_in"]
    # reproduce the selection and permutation from the recorded seeds
    rng = np.random.default_rng(meta["subsample_seed"])
    train, ev = split_eval(select(np.array(["web"] * n, dtype=object), {"web": n}, rng), 0.1, rng)
    order = train[np.random.default_rng(meta["permutation_seed"]).permutation(len(train))]
    assert np.array_equal(ids, rows[order])
    assert np.array_equal(eids, rows[ev])  # eval keeps pack order
    assert meta["pre_shuffled"] is True and emeta["pre_shuffled"] is False
    # `seed` is the recipe's (what a trainer reads); the derived seeds keep their own keys
    assert meta["seed"] == 5 and meta["subsample_seed"] == 5 and meta["permutation_seed"] == 6
    assert emeta["seed"] == 5 and emeta["permutation_seed"] is None
    assert meta["shard_sizes"][:-1] == [7] * (meta["num_shards"] - 1)
    assert sum(meta["shard_sizes"]) == meta["num_samples"]
    assert seg.dtype == np.uint16 and seg.shape == ids.shape
    for s in meta["shards"]:
        assert s["sha256"] == sha256_file(out / "train" / s["file"])
    assert meta["eos_id"] == 1 and meta["tokenizer_sha256"] == "f" * 64
    assert abs(res.stats["shuffle_spearman"]) < 0.5


def test_shard_members_are_memory_mappable(tmp_path):
    run_dir = packed_run(tmp_path)
    _, out = run_shard(run_dir, {"shard_size": 10})
    path = out / "train" / "shard_000000.npz"
    mm = npz_member(path, "input_ids")
    assert isinstance(mm, np.memmap)
    assert np.array_equal(np.asarray(mm), np.load(path)["input_ids"])


def test_subsample_fraction_count_and_weights(tmp_path):
    run_dir = packed_run(tmp_path, sources=("a", "b"), n_docs=200)
    n = len(pack_rows(run_dir))
    res, out = run_shard(run_dir, {"fraction": 0.5, "eval_fraction": 0.0})
    assert res.stats["sequences_train"] == round(n * 0.5)
    assert res.stats["sequences_eval"] == 0
    res, out = run_shard(
        run_dir, {"num_samples": 20, "source_weights": {"a": 3, "b": 1}, "eval_fraction": 0.0}
    )
    assert res.stats["sequences_per_source"] == {"a": 15, "b": 5}
    meta, ids, _ = read_split(out / "train")
    assert meta["samples_per_source"] == {"a": 15, "b": 5}
    # shrink: a 1:9 mix asks for more b than there is, so all shrink to b's count, shares kept
    cfg = {"source_weights": {"a": 1, "b": 9}, "source_shortfall": "shrink", "eval_fraction": 0.0}
    res_shrink, out_shrink = run_shard(run_dir, cfg)
    got = read_split(out_shrink / "train")[0]["samples_per_source"]
    seqs = sorted((run_dir / "pack").glob("*.seqs.parquet"))
    sources = [s for p in seqs for s in pq.read_table(p).column("source").to_pylist()]
    assert got == {"a": round(sources.count("b") / 9), "b": sources.count("b")}
    assert res_shrink.stats["source_shortfall"] == "shrink"
    # the stage selects over integer source codes; selecting over the names gives the same rows
    seqs = sorted((run_dir / "pack").glob("*.seqs.parquet"))
    names = np.array(
        [s for p in seqs for s in pq.read_table(p).column("source").to_pylist()], dtype=object
    )
    rng = np.random.default_rng(meta["subsample_seed"])
    train, _ = split_eval(select(names, {"a": 15, "b": 5}, rng), 0.0, rng)
    order = train[np.random.default_rng(meta["permutation_seed"]).permutation(len(train))]
    assert np.array_equal(ids, pack_rows(run_dir)[order])


def test_same_bytes_for_two_workers_and_seed_changes_order(tmp_path):
    run_dir = packed_run(tmp_path)
    hashes = []
    for workers, seed in ((1, 5), (2, 5), (1, 9)):
        _, out = run_shard(run_dir, {"shard_size": 9}, workers, recipe_seed=seed)
        hashes.append({p.name: sha256_file(p) for p in sorted((out / "train").iterdir())})
    assert hashes[0] == hashes[1]
    assert hashes[0] != hashes[2]


def test_recipe_errors():
    with pytest.raises(RecipeError, match="set fraction or num_samples, not both"):
        build_config(ShardConfig, {"fraction": 0.5, "num_samples": 3}, "shard")
    with pytest.raises(RecipeError, match="shard.fraction: must be in \\(0.0, 1.0\\]"):
        build_config(ShardConfig, {"fraction": 1.5}, "shard")
    with pytest.raises(RecipeError, match="weights must be >= 0"):
        build_config(ShardConfig, {"source_weights": {"a": -1}}, "shard")
    with pytest.raises(RecipeError, match="shard.source_shortfall: shrink keeps the shares"):
        build_config(ShardConfig, {"source_shortfall": "shrink"}, "shard")


def test_recipe_end_to_end_through_tokenize(tmp_path):
    """download -> tokenize -> pack -> shard via the runner; workers 1 and 2 give the same bytes."""
    from helpers import run_stages
    from pipeline.manifest import Manifest

    stages = {
        "download": {"source": "toy", "max_docs": 200, "docs_per_part": 50},
        "tokenize": {"vocab_size": 400},
        "pack": {"seq_len": 128, "sequences_per_part": 64},
        "shard": {"shard_size": 32, "eval_fraction": 0.05},
    }
    digests = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        run_stages(out, stages, workers=workers)
        m = Manifest.load(out)
        digests.append(
            {o["path"]: o["sha256"] for s in ("pack", "shard") for o in m.stages[s]["outputs"]}
        )
        meta, ids, seg = read_split(out / "shard" / "train")
        assert meta["num_samples"] == len(ids) > 0 and ids.shape[1] == 128
        assert (ids[seg == 0] == meta["pad_id"]).all()
    assert digests[0] == digests[1]
    again = run_stages(out, stages, workers=2)  # a re-run finds everything up to date
    assert [it.action for it in again] == ["skip"] * 4
    stages["shard"]["eval_fraction"] = 0.1  # a shard change re-runs shard only
    assert [it.action for it in run_stages(out, stages)] == ["skip"] * 3 + ["run"]


def test_shuffle_command_on_stage_output_keeps_metadata(tmp_path):
    from pipeline.rebalance import shuffle_shards

    run_dir = packed_run(tmp_path)
    _, out = run_shard(run_dir, {"shard_size": 9, "eval_fraction": 0.1})
    meta = shuffle_shards(out, tmp_path / "reshuffled", 4, seed=3)
    before, ids, _ = read_split(out / "train")
    after, ids2, _ = read_split(tmp_path / "reshuffled" / "train")
    assert after == meta and after["seed"] == 3 and after["shard_size"] == 4
    assert after["permutation_seed"] == 3 and after["subsample_seed"] == before["subsample_seed"]
    assert after["tokenizer_sha256"] == before["tokenizer_sha256"]
    assert sorted(map(bytes, ids)) == sorted(map(bytes, ids2))
    assert not np.array_equal(ids, ids2)
    assert (tmp_path / "reshuffled" / "eval" / "metadata.json").read_bytes() == (
        out / "eval" / "metadata.json"
    ).read_bytes()


def test_bad_pack_output_raises(tmp_path):
    from pipeline.errors import DataError

    run_dir = packed_run(tmp_path)
    (run_dir / "pack" / "part-00000.segment_ids.npy").unlink()
    with pytest.raises(DataError, match="part-00000.segment_ids: missing from pack's output"):
        run_shard(run_dir, {})
    (run_dir / "pack" / "meta.json").unlink()
    with pytest.raises(DataError, match="meta.json: missing from the pack stage's output"):
        run_shard(run_dir, {})


def _indices(rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Pack index of each output row (the fake tokens make every packed row distinct)."""
    where = {r.tobytes(): i for i, r in enumerate(rows)}
    assert len(where) == len(rows)
    return np.array([where[r.tobytes()] for r in ids], np.int64)


def test_bounded_path_is_a_seeded_permutation_with_exact_source_counts(tmp_path):
    """exact_max_sequences below the input: per-part selection + Feistel order. All kept:
    train + eval are every sequence exactly once, eval in pack order; the same bytes for 1 and
    2 workers; another seed, another order."""
    run_dir = packed_run(tmp_path, sources=("a", "b"), n_docs=200)
    rows = pack_rows(run_dir)
    cfg = {"shard_size": 9, "eval_fraction": 0.1, "exact_max_sequences": 10}
    hashes = []
    for workers, seed in ((1, 5), (2, 5), (1, 9)):
        res, out = run_shard(run_dir, cfg, workers, recipe_seed=seed)
        hashes.append({p.name: sha256_file(p) for p in sorted((out / "train").iterdir())})
        assert not (out / ".select").exists()
    assert hashes[0] == hashes[1] and hashes[0] != hashes[2]
    assert res.stats["shuffle_method"] == "feistel"
    meta, ids, _ = read_split(out / "train")
    emeta, eids, _ = read_split(out / "eval")
    train, ev = _indices(rows, ids), _indices(rows, eids)
    assert sorted([*train.tolist(), *ev.tolist()]) == list(range(len(rows)))
    assert len(ev) == round(0.1 * len(rows)) and (np.diff(ev) > 0).all()
    assert not (np.diff(train) > 0).all()  # shuffled
    assert meta["shard_sizes"][:-1] == [9] * (meta["num_shards"] - 1)
    for s in meta["shards"]:
        assert s["sha256"] == sha256_file(out / "train" / s["file"])
    assert res.stats["shuffle_max_share_deviation_samples"] >= 0
    assert abs(res.stats["shuffle_spearman"]) < 0.5


def test_bounded_path_keeps_the_per_source_counts(tmp_path):
    run_dir = packed_run(tmp_path, sources=("a", "b"), n_docs=200)
    seqs = sorted((run_dir / "pack").glob("*.seqs.parquet"))
    names = [s for p in seqs for s in pq.read_table(p).column("source").to_pylist()]
    cfg = {"num_samples": 20, "source_weights": {"a": 3, "b": 1}, "eval_fraction": 0.25}
    res, out = run_shard(run_dir, {**cfg, "exact_max_sequences": 1})
    assert res.stats["sequences_per_source"] == {"a": 15, "b": 5}
    meta, ids, _ = read_split(out / "train")
    emeta, eids, _ = read_split(out / "eval")
    picked = [names[i] for i in _indices(pack_rows(run_dir), np.concatenate([ids, eids]))]
    assert {s: picked.count(s) for s in ("a", "b")} == {"a": 15, "b": 5}
    assert len(set(_indices(pack_rows(run_dir), ids).tolist())) == 15 == meta["num_samples"]
    assert emeta["num_samples"] == 5
    both = {
        s: meta["samples_per_source"].get(s, 0) + emeta["samples_per_source"].get(s, 0)
        for s in "ab"
    }
    assert both == {"a": 15, "b": 5}
    exact, _ = run_shard(run_dir, cfg)  # the exact path keeps the same counts
    assert exact.stats["shuffle_method"] == "exact"
    assert exact.stats["sequences_per_source"] == res.stats["sequences_per_source"]

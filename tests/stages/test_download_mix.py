"""download.sources: weighted mixing (repetition, seeded sampling), its report, dedup of the
copies, shard metadata; download.url_field on every JSONL path. Data made here."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest

from helpers import fake_tokenize, make_ctx, run_pack, run_stages
from pipeline.errors import RecipeError
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.recipe import build_config
from pipeline.report import load_report
from pipeline.report.html import render_html
from pipeline.stage import StageInputs
from pipeline.stages.download import mix
from pipeline.stages.shard import ShardConfig
from pipeline.stages.shard import run as shard_run
from synth_text import docs


def table(run, stage="download"):
    return pa.concat_tables([read_table(p) for p in Manifest.load(run).parts(stage)])


def stats(run, stage="download"):
    return next(s["stats"] for s in load_report(run)["stages"] if s["stage"] == stage)


def write_jsonl(path, texts, url=False):
    rows = [
        {
            "id": f"{path.stem}{i}",
            "text": t,
            **({"url": f"https://{path.stem}.org/{i}"} if url else {}),
        }
        for i, t in enumerate(texts)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def mix_recipe(tmp_path, weights=(3.0, 0.5), n=(5, 40), dup=False):
    wiki = docs(n[0], seed=1, sentences=8)
    if dup:
        wiki[-1] = wiki[0]  # a duplicate inside the upsampled source
    write_jsonl(tmp_path / "wiki.jsonl", wiki)
    write_jsonl(tmp_path / "web.jsonl", docs(n[1], seed=2, sentences=8))
    return {
        "sources": [
            {"source": "jsonl", "path": str(tmp_path / "wiki.jsonl"), "weight": weights[0]},
            {
                "source": "jsonl",
                "path": str(tmp_path / "web.jsonl"),
                "name": "cc",
                "weight": weights[1],
            },
        ],
        "docs_per_part": 16,
    }


def test_upsampling_repeats_passes_and_downsampling_is_seeded(tmp_path):
    """wiki × 3: 5 -> 15 documents (passes 0, 1, 2 with distinct ids); cc × 0.5: a seeded
    subset of 40 whose size matches the keyed draws; docs_in == docs_out + Σ dropped."""
    block = mix_recipe(tmp_path)
    run_stages(tmp_path / "a", {"download": block})
    t = table(tmp_path / "a")
    st = stats(tmp_path / "a")
    ids = t.column("id").to_pylist()
    assert len(set(ids)) == len(ids)
    wiki = [i for i in ids if i.startswith("wiki/")]
    assert wiki[:6] == [
        "wiki/wiki0",
        "wiki/wiki1",
        "wiki/wiki2",
        "wiki/wiki3",
        "wiki/wiki4",
        "wiki/wiki0@1",
    ]
    assert len(wiki) == 15 and wiki[-1] == "wiki/wiki4@2"
    copies = t.column(mix.COPY_COLUMN).to_pylist()
    assert copies[:15] == [0] * 5 + [1] * 5 + [2] * 5
    key = mix.source_key(st["mix_seed"], "cc")
    expect = sum(mix.keep_draw(key, i) < 0.5 for i in range(40))
    assert 8 <= expect <= 32 and st["mix"]["cc"]["docs_after"] == expect
    assert st["docs_per_source"] == {"wiki": 15, "cc": expect}
    assert st["mix"]["wiki"]["shown_as"] == "wiki × 3" and st["mix"]["cc"]["docs_before"] == 40
    assert st["mix_summary"].startswith("wiki × 3 (5 -> 15 docs), cc × 0.5 (40 -> ")
    assert st["dropped_mix_not_sampled"] == 40 - expect
    assert st["docs_in"] == st["docs_out"] + st["dropped_mix_not_sampled"]
    assert set(t.column("source").to_pylist()) == {"wiki", "cc"}
    page = render_html(load_report(tmp_path / "a"))
    assert "mix: documents per source before and after" in page and "wiki × 3" in page
    # same recipe, same bytes; another seed samples another subset
    run_stages(tmp_path / "b", {"download": block})
    assert _hashes(tmp_path / "a") == _hashes(tmp_path / "b")
    run_stages(tmp_path / "c", {"download": block}, seed=99)
    assert table(tmp_path / "c").column("id").to_pylist() != ids


def test_fractional_weight_above_one_is_full_passes_plus_a_sampled_one(tmp_path):
    block = mix_recipe(tmp_path, weights=(2.5, 1.0), n=(30, 3))
    run_stages(tmp_path / "r", {"download": block})
    st = stats(tmp_path / "r")
    w = st["mix"]["wiki"]
    assert w["full_passes"] == 2 and w["sampled_pass_fraction"] == 0.5
    assert 60 < w["docs_after"] < 90 and st["mix"]["cc"]["docs_after"] == 3
    copies = table(tmp_path / "r").column(mix.COPY_COLUMN).to_pylist()
    assert (
        copies.count(0) == 33 and copies.count(1) == 30 and copies.count(2) == w["docs_after"] - 60
    )


def _hashes(run, stages=("download",)):
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for s in stages
        for p in sorted((run / s).rglob("*.parquet"))
    }


def test_dedup_keeps_the_copies_the_mix_asked_for_and_removes_true_duplicates(tmp_path):
    """wiki (5 docs, the last a copy of the first) × 3: exact dedup removes the in-source copy
    from every pass (3 dropped) and keeps 4 × 3 = 12; byte-identical with 1 and 2 workers."""
    block = mix_recipe(tmp_path, weights=(3.0, 1.0), n=(5, 6), dup=True)
    stages = {"download": block, "dedup": {"near": True}}
    run_stages(tmp_path / "w1", stages)
    t = table(tmp_path / "w1", "dedup")
    wiki = [i for i in t.column("id").to_pylist() if i.startswith("wiki/")]
    assert len(wiki) == 12 and not any(i.startswith("wiki/wiki4") for i in wiki)
    st = stats(tmp_path / "w1", "dedup")
    assert st["dropped_exact_dup"] == 3 and st["dropped_near_dup"] == 0
    run_stages(tmp_path / "w2", stages, workers=2)
    assert _hashes(tmp_path / "w1", ("download", "dedup")) == _hashes(
        tmp_path / "w2", ("download", "dedup")
    )


def test_mix_recipe_errors(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", ["x"])
    one = {"source": "jsonl", "path": str(tmp_path / "a.jsonl")}
    with pytest.raises(RecipeError, match=r"download.sources\[1\].name.*'a' is also source 0"):
        run_stages(tmp_path / "r", {"download": {"sources": [one, one]}})
    with pytest.raises(RecipeError, match=r"download.sources\[0\].weight: must be in \(0.0"):
        run_stages(tmp_path / "r", {"download": {"sources": [{**one, "weight": 0}]}})
    with pytest.raises(RecipeError, match=r"download.sources\[0\].path.*no file matches"):
        run_stages(tmp_path / "r", {"download": {"sources": [{**one, "path": "nope/*.jsonl"}]}})
    with pytest.raises(RecipeError, match=r"download.sources: is empty"):
        run_stages(tmp_path / "r", {"download": {"sources": []}})
    with pytest.raises(RecipeError, match=r"download.path: is not read when download.sources"):
        run_stages(tmp_path / "r", {"download": {"sources": [one], "path": str(tmp_path)}})


def test_shard_metadata_records_the_mix(tmp_path):
    run = tmp_path / "run"
    fake_tokenize(run, [[20, 30, 40], [25, 35]], sources=["wiki", "cc"])
    run_pack(run, {"seq_len": 32})
    per = {"wiki": mix.SourceTally(3.0, 5, 15).stats("wiki")}
    (run / "download").mkdir()
    mix.write_mix_file(run / "download", per, 7)
    ctx = make_ctx(run, "shard", "pack", seed=5)
    ctx.inputs["download"] = StageInputs.from_dir("download", run / "download")
    try:
        shard_run(build_config(ShardConfig, {}, "shard"), ctx)
    finally:
        ctx.executor.close()
    meta = json.loads((ctx.out_dir / "train" / "metadata.json").read_text())
    assert meta["mix"] == {"seed": 7, "sources": per}
    assert meta["mix"]["sources"]["wiki"]["shown_as"] == "wiki × 3"


def test_url_field_is_kept_by_serial_and_parallel_jsonl_readers(tmp_path):
    """download.url_field keeps the `url` column: one file (one task), two files (range tasks
    and temp files) with 1 and 2 workers, and the serial reader (max_docs) agree."""
    write_jsonl(tmp_path / "a.jsonl", [f"doc {i}" for i in range(7)], url=True)
    write_jsonl(tmp_path / "b.jsonl", [f"doc {i}" for i in range(5)], url=True)
    base = {"source": "jsonl", "url_field": "url", "docs_per_part": 4}
    got = []
    for name, block, workers in (
        ("glob1", {"path": str(tmp_path / "*.jsonl")}, 1),
        ("glob2", {"path": str(tmp_path / "*.jsonl")}, 2),
        ("serial", {"path": str(tmp_path / "*.jsonl"), "max_docs": 100}, 1),
    ):
        run_stages(tmp_path / name, {"download": {**base, **block}}, workers=workers)
        got.append(table(tmp_path / name).select(["id", "text", "url"]))
    assert got[0].equals(got[1]) and got[0].equals(got[2])
    assert got[0].column("url").to_pylist()[:2] == ["https://a.org/0", "https://a.org/1"]
    run_stages(tmp_path / "one", {"download": {**base, "path": str(tmp_path / "a.jsonl")}})
    assert table(tmp_path / "one").column("url").to_pylist()[6] == "https://a.org/6"

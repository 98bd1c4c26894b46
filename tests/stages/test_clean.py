"""The clean stage end to end: toy acceptance, report, rejected parts, determinism, errors."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest

from helpers import make_recipe, run_stages
from pipeline.errors import DataError, RecipeError
from pipeline.inspect import inspect_rejected
from pipeline.manifest import Manifest
from pipeline.report import load_report
from pipeline.stage import PartItem
from pipeline.stages.clean import CleanConfig, clean_part

CAUGHT = ("html", "spam", "repeated", "symbols", "short", "lorem")


def _clean_stats(run_dir):
    return next(s for s in load_report(run_dir)["stages"] if s["stage"] == "clean")["stats"]


def _labels(run_dir, pattern):
    out = Counter()
    for part in sorted((run_dir / "clean").glob(pattern)):
        out.update(pq.read_table(part, columns=["label"]).column("label").to_pylist())
    return out


@pytest.fixture(scope="module")
def toy_clean(tmp_path_factory):
    """1200 toy documents (~15% junk), cleaned with the recipe defaults."""
    out = tmp_path_factory.mktemp("clean") / "run"
    run_stages(
        out, {"download": {"source": "toy", "max_docs": 1200, "docs_per_part": 300}, "clean": None}
    )
    return out


def test_toy_acceptance_junk_removed_good_kept(toy_clean):
    kept, rejected = _labels(toy_clean, "part-*.parquet"), _labels(toy_clean, "rejected/*.parquet")
    caught_total = sum(kept[f"junk:{k}"] + rejected[f"junk:{k}"] for k in CAUGHT)
    caught_removed = sum(rejected[f"junk:{k}"] for k in CAUGHT)
    assert caught_total > 60
    assert caught_removed / caught_total >= 0.95
    assert kept["good"] / (kept["good"] + rejected["good"]) >= 0.98
    # pii documents are kept (redacted); duplicates are dedup's job
    for kind in ("pii", "exact_dup", "near_dup"):
        assert rejected[f"junk:{kind}"] == 0 and kept[f"junk:{kind}"] > 0


def test_pii_docs_are_redacted_in_output(toy_clean):
    table = pq.read_table(toy_clean / "clean" / "part-00000.parquet").to_pylist()
    pii = [r["text"] for r in table if r["label"] == "junk:pii"]
    assert pii
    for text in pii:
        assert "@example.com" not in text and "sk_live_" not in text
        for placeholder in ("<|email|>", "<|phone|>", "<|ip|>", "<|key|>"):
            assert placeholder in text
    stats = _clean_stats(toy_clean)
    assert stats["pii_email_replaced"] >= len(pii)


def test_report_balances_and_attributes(toy_clean):
    stats = _clean_stats(toy_clean)
    dropped = {k: v for k, v in stats.items() if k.startswith("dropped_")}
    assert stats["docs_in"] == 1200 == stats["docs_out"] + sum(dropped.values())
    rules = stats["rules"]
    assert sum(r["first"] for r in rules.values()) == sum(dropped.values())
    for name, r in rules.items():
        assert r["alone"] <= r["first"] <= r["all"], name
        assert dropped.get(f"dropped_{name}", 0) == r["first"]
    hist = stats["histograms"]["gopher_min_words_v1"]
    assert sum(hist["counts"]) == stats["docs_in"]
    assert 50.0 in hist["bins"] and hist["threshold"] == 50.0 and hist["direction"] == "min"
    assert stats["bytes_in"] > stats["bytes_out"] > 0
    assert stats["docs_per_s"] > 0 and stats["mb_per_s"] > 0
    json.dumps(stats)  # plain JSON types only


def test_rejected_parts_keep_input_columns_and_all_reasons(toy_clean):
    parts = sorted((toy_clean / "clean" / "rejected").glob("part-*.parquet"))
    assert parts
    table = pq.read_table(parts[0])
    assert table.column_names == ["id", "text", "source", "label", "reasons"]
    rows = table.to_pylist()
    assert all(r["reasons"] for r in rows)
    assert any(len(r["reasons"]) > 1 for r in rows)  # every failing rule, not only the first
    html = [r for r in rows if r["label"] == "junk:html"]
    assert not html or "<html>" in html[0]["text"]  # the original text, to see what was dropped


def test_inspect_prints_examples_for_a_rule(toy_clean):
    out = inspect_rejected(toy_clean, "clean", "c4_lorem_ipsum_v2", 2, 120)
    assert out.count("--- toy-") == 2 and "Lorem ipsum" in out


def test_workers_give_identical_bytes(tmp_path):
    stages = {"download": {"source": "toy", "max_docs": 300, "docs_per_part": 100}, "clean": None}
    hashes = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        run_stages(out, stages, workers=workers)
        hashes.append(
            {o["path"]: o["sha256"] for o in Manifest.load(out).stages["clean"]["outputs"]}
        )
    assert hashes[0] == hashes[1]
    assert any(p.startswith("clean/rejected/") for p in hashes[0])


def test_recipe_errors(tmp_path):
    with pytest.raises(RecipeError, match=r"clean.redact_pii\[1\]: got 'ssn'"):
        make_recipe(
            tmp_path, {"download": {"source": "toy"}, "clean": {"redact_pii": ["url", "ssn"]}}
        )
    with pytest.raises(RecipeError, match="clean.min_words: must be <= max_words"):
        make_recipe(
            tmp_path, {"download": {"source": "toy"}, "clean": {"min_words": 500, "max_words": 100}}
        )
    with pytest.raises(RecipeError, match=r"clean.max_dup_lines_frac: must be in \[0.0, 1.0\]"):
        make_recipe(tmp_path, {"download": {"source": "toy"}, "clean": {"max_dup_lines_frac": 2}})


def test_bad_records_and_a_50mb_document(tmp_path):
    """Empty, whitespace-only, NUL-laden and one 50 MB document: counted, never a crash."""
    src = tmp_path / "in.jsonl"
    good = " ".join(["The river and the garden of the village were quiet that morning."] * 8)
    big = "word " * 10_000_000  # 50 MB
    rows = [
        {"id": "empty", "text": ""},
        {"id": "ws", "text": "  \n\t "},
        {"id": "nul", "text": "\x00" * 10 + good.replace("quiet", "qu\x00iet", 1)},
        {"id": "big", "text": big},
    ]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "run"
    run_stages(
        out,
        {
            "download": {"source": "jsonl", "path": str(src)},
            "clean": {
                "max_dup_5gram_chars_frac": None,
                "max_top_2gram_chars_frac": None,
                "max_top_3gram_chars_frac": None,
                "max_top_4gram_chars_frac": None,
                **{f"max_dup_{n}gram_chars_frac": None for n in range(6, 11)},
            },
        },
    )
    stats = _clean_stats(out)
    assert stats["docs_in"] == 4
    assert stats["dropped_empty_doc_v1"] == 2
    assert stats["dropped_max_chars_v1"] == 1 and stats["docs_stats_skipped_too_long"] == 1
    kept = pq.read_table(out / "clean" / "part-00000.parquet").to_pylist()
    assert [r["id"] for r in kept] == ["nul"]
    assert "\x00" not in kept[0]["text"] and "quiet" in kept[0]["text"]


def test_unreadable_part_is_a_data_error(tmp_path):
    bad = tmp_path / "part-00000.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="part-00000.parquet: cannot read Parquet part"):
        clean_part(PartItem(0, str(bad)), CleanConfig(), str(tmp_path / "out"))


def test_waves_of_parts_sum_to_the_same_stats_and_bytes(tmp_path, monkeypatch):
    """The driver folds part summaries wave by wave (held: one wave, not every part): 10 parts
    in waves of 8 give the one-wave run's stats and files."""
    import pipeline.stages.clean as clean_stage
    from pipeline.executor import BaseExecutor

    calls = Counter()
    real_map = BaseExecutor.map

    def spy(self, fn, items, desc=""):
        calls[desc] += 1
        return real_map(self, fn, items, desc)

    monkeypatch.setattr(BaseExecutor, "map", spy)
    stages = {"download": {"source": "toy", "max_docs": 300, "docs_per_part": 30}, "clean": None}
    got = []
    for wave in (10_000, 0):  # 0: max(0, 8 * workers) = 8 parts per map call
        monkeypatch.setattr(clean_stage, "WAVE_PARTS", wave)
        calls.clear()
        out = tmp_path / f"wave{wave}"
        run_stages(out, stages)
        got.append(
            (
                {o["path"]: o["sha256"] for o in Manifest.load(out).stages["clean"]["outputs"]},
                {k: v for k, v in _clean_stats(out).items() if not k.endswith("_per_s")},
                calls["clean"],
            )
        )
    assert [g[2] for g in got] == [1, 2]  # 10 parts: one call, then 8 + 2
    assert got[0][:2] == got[1][:2]


def test_default_rule_table_is_what_the_defaults_keep(tmp_path):
    """For a threshold-only config (min_words 61 instead of 50), clean_part writes
    default_rule/part-i: the rows CleanConfig() keeps, their row in the kept part (-1 for the
    60-word document this config drops), and, for that one, the text the defaults give it
    (normalised and redacted). A text-changing config writes none."""
    import numpy as np
    import pyarrow as pa

    from pipeline.sources.toy import good_doc
    from pipeline.stages.clean import clean_texts

    rng = np.random.default_rng(1)
    docs = [good_doc(rng) for _ in range(2)]  # 190 and 182 words
    texts = [
        docs[0] + " Mail ann@example.com now.",  # kept by both
        " ".join(docs[1].split()[:55]) + ". Mail bob@example.com &amp; more.",  # 60 words
        " ".join(docs[1].split()[:20]) + ".",  # both drop
    ]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": texts}), path)
    out = clean_part(PartItem(0, str(path)), CleanConfig(min_words=61), str(tmp_path / "o"))
    assert "default_rule/part-00000.parquet" in out["outputs"]
    rule = pq.read_table(tmp_path / "o/default_rule/part-00000.parquet").to_pylist()
    want = clean_texts(texts, CleanConfig())
    assert [r["row"] for r in rule] == [0, 1] and want.keep.tolist() == [True, True, False]
    assert [r["kept_row"] for r in rule] == [0, -1]
    assert rule[0]["text"] is None and rule[1]["text"] == want.texts[1]
    assert "bob@example.com" not in rule[1]["text"] and "&amp;" not in rule[1]["text"]
    out = clean_part(
        PartItem(0, str(path)), CleanConfig(min_words=61, nfkc=False), str(tmp_path / "p")
    )
    assert not any(o.startswith("default_rule/") for o in out["outputs"])

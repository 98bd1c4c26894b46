"""quality stage: statistics, hashed features, logistic regression, keep rules, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.errors import DataError, RecipeError
from pipeline.quality import select
from pipeline.quality.features import (
    DEFAULT_BIAS,
    DEFAULT_WEIGHTS,
    STAT_NAMES,
    doc_stats,
    hashed_features,
    heuristic_score,
    stats_matrix,
)
from pipeline.quality.logreg import load_model, roc_auc
from pipeline.sources import toy
from pipeline.sources.toy import good_doc
from synth_text import docs, salad, zh_docs

PROSE = (
    "The old farmer watched the river near the bridge. It was warm when the children "
    "crossed the meadow, and they gathered apples for the market."
)


def _stat(text: str) -> dict[str, float]:
    return dict(zip(STAT_NAMES, doc_stats(text, 100_000), strict=True))


def _report(run: Path, stage: str = "quality") -> dict:
    report = json.loads((run / "pipeline_report.json").read_text())
    return next(s["stats"] for s in report["stages"] if s["stage"] == stage)


def _rows(run: Path) -> list[dict]:
    rows = []
    for part in sorted((run / "quality").glob("**/part-*.parquet")):
        rows += pq.read_table(part).to_pylist()
    return rows


def _jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    return path


# ---------------------------------------------------------------- pure functions


def test_doc_stats_worked_example():
    """'a a a b.\\nc d.\\nc d.' : 8 whitespace words, all with letters -> length 8/50 = 0.16,
    alpha_words 1. Letter tokens a a a b c d c d: 'a' is a stop word -> 3/8. Lines: 3, all end
    in '.', 1 duplicate -> terminal 1, dup_lines 1/3. unique 4/8. Trigrams: 6, distinct
    (aaa, aab, abc, bcd, cdc, dcd) 6 -> dup 0. Mean word length 1 < 3 -> 1 - (3 - 1)/3 = 1/3."""
    s = _stat("a a a b.\nc d.\nc d.")
    assert s["length"] == pytest.approx(0.16)
    assert s["alpha_words"] == 1.0
    assert s["stop_words"] == pytest.approx(3 / 8)
    assert s["terminal_punct"] == 1.0
    assert s["dup_lines"] == pytest.approx(1 / 3)
    assert s["unique_words"] == pytest.approx(0.5)
    assert s["dup_trigrams"] == 0.0
    assert s["symbols"] == 0.0
    assert s["word_length"] == pytest.approx(1 / 3)


def test_doc_stats_hard_wrapped_line_counts_as_ended_and_empty_is_zero():
    assert _stat("The farmer went\nto the market.")["terminal_punct"] == 1.0
    assert _stat("Home | About\nContact")["terminal_punct"] == 0.0
    assert doc_stats("  \n ", 1000) == (0.0,) * len(STAT_NAMES)


def test_heuristic_ranks_prose_above_spam_and_repetition():
    texts = [
        toy.good_doc(np.random.default_rng(0)),
        "buy cheap casino " * 40,
        "\n".join(["Click here to win now."] * 30),
        "#$% @@! {}[] ~~~ " * 30,
    ]
    h = heuristic_score(stats_matrix(texts, 100_000), DEFAULT_WEIGHTS, DEFAULT_BIAS)
    assert h[0] > 0.8
    assert (h[1:] < 0.1).all()


def test_roc_auc_worked_example_with_ties():
    """Positives 0.35, 0.8 vs negatives 0.1, 0.4: pairs won (0.35>0.1), (0.8>0.1), (0.8>0.4)
    = 3 of 4 -> 0.75. All-tied scores -> 0.5. One class -> None."""
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
    assert roc_auc(np.ones(4), np.array([0, 1, 0, 1])) == 0.5
    assert roc_auc(np.ones(3), np.ones(3)) is None


def test_hashed_features_rows_normalised_bigrams_stay_inside_documents():
    X = hashed_features(["b a", "", "a b a b"], 1 << 18, 0, 1000)
    assert X.num_rows == 3 and X.indptr[1] - X.indptr[0] == 3  # a, b, "b a"
    assert X.indptr[2] == X.indptr[1]  # the empty document has an empty row
    norms = np.bincount(X.row_ids(), weights=X.data.astype(np.float64) ** 2, minlength=3)
    assert norms[[0, 2]] == pytest.approx([1.0, 1.0])
    # a document's row does not depend on its neighbours (no bigram across the boundary)
    alone = hashed_features(["a b a b"], 1 << 18, 0, 1000)
    assert np.array_equal(alone.indices, X.indices[X.indptr[2] :])
    assert np.array_equal(alone.data, X.data[X.indptr[2] :])
    # doc 2: a, b (count 2 each -> 1 + ln 2), "a b" (2), "b a" (1): 4 features
    assert X.indptr[3] - X.indptr[2] == 4


def test_keep_rules():
    scores = np.array([0.9, 0.1, 0.5, 0.5, 0.7, 0.0])
    scorable = np.array([True, True, True, True, True, False])
    keep, thr = select.keep_mask("min_score", scores, scorable, 0.5, 0.8, 9.0, 0)
    assert keep.tolist() == [True, False, True, True, True, False] and thr == 0.5
    keep, thr = select.keep_mask("keep_fraction", scores, scorable, 0.5, 0.6, 9.0, 0)
    assert keep.tolist() == [True, False, True, False, True, False] and thr == 0.5  # tie: row 2
    a, _ = select.keep_mask("pareto", scores, scorable, 0.5, 0.6, 9.0, 3)
    b, _ = select.keep_mask("pareto", scores, scorable, 0.5, 0.6, 9.0, 3)
    assert np.array_equal(a, b) and not a[5]
    many = select.keep_mask("pareto", np.full(10_000, 0.9), np.ones(10_000, bool), 0, 0, 9.0, 1)
    # P(pareto(9) > 0.1) = 1.1 ** -9 = 0.424
    assert many[0].mean() == pytest.approx(1.1**-9, abs=0.02)


# ---------------------------------------------------------------- the stage, end to end


def test_toy_classifier_ranks_junk_below_good(toy_run):
    run_stages(
        toy_run,
        {
            "download": {"source": "toy", "max_docs": 400, "docs_per_part": 100},
            "quality": {"score": "mean"},
        },
    )
    stats = _report(toy_run)
    assert stats["classifier"]["status"] == "trained"
    assert stats["hidden_label_auc"]["auc_classifier"] >= 0.95
    assert stats["hidden_label_auc"]["auc_heuristic"] >= 0.95
    assert stats["hidden_label_auc"]["auc_mean"] >= 0.95
    assert stats["classifier"]["holdout_agreement"] >= 0.9
    rows = _rows(toy_run)
    assert len(rows) == 400 == stats["docs_in"]
    assert all(isinstance(r["quality"], float) and 0.0 <= r["quality"] <= 1.0 for r in rows)
    assert {r["label"] for r in rows} >= {"good"}  # upstream columns are kept
    rejected = [r for r in rows if r.get("reasons")]
    assert len(rejected) == stats["dropped_low_quality"] > 0
    assert all(r["reasons"] == ["low_quality"] and r["quality"] < 0.5 for r in rejected)
    bad_kinds = {r["label"] for r in rejected}
    assert bad_kinds <= {f"junk:{k}" for k in toy.JUNK_KINDS}
    schema = pq.read_schema(toy_run / "quality" / "part-00000.parquet")
    assert str(schema.field("quality").type) == "float"
    assert len(stats["decile_examples"]) == 10
    assert stats["score_histogram"]["threshold"] == 0.5
    assert sum(stats["score_histogram"]["counts"]) == 400
    model = load_model(toy_run / "quality" / "model.npz")
    assert len(model.w_hashed) == 1 << 18


def test_same_bytes_for_any_worker_count_and_model_reuse(tmp_path):
    stages = {
        "download": {"source": "toy", "max_docs": 300, "docs_per_part": 75},
        "quality": {"keep_rule": "pareto", "score": "mean"},
    }
    run_stages(tmp_path / "w1", stages, workers=1)
    run_stages(tmp_path / "w2", stages, workers=2)
    files = sorted(
        p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1/quality").rglob("*") if p.is_file()
    )
    assert Path("quality/model.npz") in files and len(files) >= 5
    for rel in files:
        assert (tmp_path / "w1" / rel).read_bytes() == (tmp_path / "w2" / rel).read_bytes(), rel
    reuse = {
        **stages,
        "quality": {
            "model_path": str(tmp_path / "w1/quality/model.npz"),
            "keep_rule": "pareto",
            "score": "mean",
        },
    }
    run_stages(tmp_path / "reuse", reuse)
    assert _report(tmp_path / "reuse")["classifier"]["status"] == "loaded"
    assert not (tmp_path / "reuse/quality/model.npz").exists()
    for rel in files:
        if rel.suffix == ".parquet":
            a = (tmp_path / "w1" / rel).read_bytes()
            assert a == (tmp_path / "reuse" / rel).read_bytes(), rel


def test_keep_fraction_and_no_words(tmp_path):
    texts = [toy.good_doc(np.random.default_rng(i)) for i in range(60)]
    texts += ["buy cheap casino deal " * 30 for _ in range(30)] + ["", "   \n  ", "!!!"]
    src = _jsonl(tmp_path / "in.jsonl", texts)
    run_stages(
        tmp_path / "run",
        {
            "download": {"source": "jsonl", "path": str(src)},
            "quality": {"keep_rule": "keep_fraction", "keep_fraction": 0.5, "min_train_docs": 5},
        },
    )
    stats = _report(tmp_path / "run")
    assert stats["dropped_no_words"] == 2  # "!!!" has a word (of symbols): it is scored
    assert stats["docs_out"] == round(0.5 * 91)
    assert stats["docs_in"] == stats["docs_out"] + stats["dropped_low_quality"] + 2
    kept = pq.read_table(tmp_path / "run/quality/part-00000.parquet").to_pylist()
    assert all("casino" not in r["text"] for r in kept)
    dropped = pq.read_table(tmp_path / "run/quality/rejected/part-00000.parquet").to_pylist()
    no_words = [r for r in dropped if r["reasons"] == ["no_words"]]
    assert len(no_words) == 2 and all(r["quality"] == 0.0 for r in no_words)


def test_identical_scores_fall_back_or_raise(tmp_path):
    src = _jsonl(tmp_path / "in.jsonl", [PROSE] * 50)
    stages = {"download": {"source": "jsonl", "path": str(src)}, "quality": {"score": "mean"}}
    run_stages(tmp_path / "run", stages)
    stats = _report(tmp_path / "run")
    assert stats["classifier"]["status"] == "fallback_heuristic"
    assert "pseudo-bad" in stats["classifier"]["why"]
    assert stats["score"] == "heuristic" and stats["docs_out"] == 50
    assert not (tmp_path / "run/quality/model.npz").exists()
    stages["quality"] = {"on_no_spread": "error", "score": "mean"}
    with pytest.raises(DataError, match="cannot bootstrap pseudo labels"):
        run_stages(tmp_path / "err", stages)


def test_single_huge_document(tmp_path):
    huge = (PROSE + "\n") * 40_000  # ~5.6 MB: only max_chars are read for stats and features
    src = _jsonl(tmp_path / "in.jsonl", [huge])
    run_stages(
        tmp_path / "run",
        {"download": {"source": "jsonl", "path": str(src)}, "quality": {"max_chars": 20_000}},
    )
    stats = _report(tmp_path / "run")
    # one document cannot train an LM (min_reference_docs): quality is the heuristic, stated
    assert stats["lm"]["status"] == "fallback_heuristic"
    assert "min_reference_docs" in stats["lm"]["why"]
    assert stats["docs_in"] == 1
    (row,) = _rows(tmp_path / "run")
    assert len(row["text"]) == len(huge)  # the document itself is never truncated


def test_seed_set_is_used_and_checked(tmp_path, toy_run):
    seed = tmp_path / "seed.jsonl"
    seed.write_text(
        json.dumps({"text": PROSE * 3, "label": "good"})
        + "\n"
        + json.dumps({"text": "win cash now " * 40, "label": "bad"})
        + "\n"
    )
    base = {"download": {"source": "toy", "max_docs": 400, "docs_per_part": 100}}
    run_stages(toy_run, {**base, "quality": {"seed_set_path": str(seed), "score": "mean"}})
    assert _report(toy_run)["classifier"]["seed_set_docs"] == 2
    run_stages(toy_run, {**base, "quality": {"seed_set_path": str(seed)}})
    assert _report(toy_run)["lm"]["classifiers"]["latin"]["seed_set_docs"] == {"good": 1, "bad": 1}
    seed.write_text('{"text": "no label"}\n')
    with pytest.raises(DataError, match="seed.jsonl:1"):
        run_stages(toy_run, {**base, "quality": {"seed_set_path": str(seed), "l2": 0.001}})


def test_recipe_errors(tmp_path):
    base = {"download": {"source": "toy", "max_docs": 10}}
    with pytest.raises(RecipeError, match="heuristic_weights.lenght: unknown statistic"):
        run_stages(tmp_path, {**base, "quality": {"heuristic_weights": {"lenght": 1.0}}})
    with pytest.raises(RecipeError, match="pseudo_bad_below: must be <= pseudo_good_above"):
        run_stages(
            tmp_path, {**base, "quality": {"pseudo_bad_below": 0.9, "pseudo_good_above": 0.2}}
        )
    with pytest.raises(RecipeError, match="model_path: file .* not found"):
        run_stages(
            tmp_path,
            {**base, "quality": {"model_path": str(tmp_path / "nope.npz"), "score": "mean"}},
        )
    with pytest.raises(RecipeError, match="keep_fraction: must be in"):
        run_stages(tmp_path, {**base, "quality": {"keep_fraction": 0.0}})
    bad_model = tmp_path / "bad.npz"
    bad_model.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a quality model"):
        run_stages(
            tmp_path / "r", {**base, "quality": {"model_path": str(bad_model), "score": "mean"}}
        )


def test_quality_after_clean(tmp_path):
    stages = {
        "download": {"source": "toy", "max_docs": 400, "docs_per_part": 100},
        "clean": {},
        "quality": {"score": "mean"},
    }
    run_stages(tmp_path, stages)
    stats = _report(tmp_path)
    assert stats["docs_in"] == _report(tmp_path, "clean")["docs_out"]
    # clean removed the junk the heuristic would call bad; its rejects become the bad class
    assert stats["classifier"]["status"] == "trained"
    assert (
        stats["classifier"]["clean_reject_docs"]
        == _report(tmp_path, "clean")["docs_in"] - (stats["docs_in"])
    )
    assert stats["classifier"]["pseudo_bad_docs"] == 0
    assert all(0.0 <= r["quality"] <= 1.0 for r in _rows(tmp_path))
    stages["quality"] = {"clean_rejects_as_bad": False, "score": "mean"}
    run_stages(tmp_path, stages)
    assert _report(tmp_path)["classifier"]["status"] == "fallback_heuristic"


def test_classifier_sample_bounded_in_bytes_and_worker_independent(tmp_path):
    """train_max_chars caps the pseudo-labelled sample and clean's rejects (a third each), which
    are read per part; the bytes do not depend on the worker count."""
    stages = {
        "download": {"source": "toy", "max_docs": 600, "docs_per_part": 100},
        "clean": {},
        "quality": {"score": "mean", "train_max_chars": 6000, "min_train_docs": 2},
    }
    run_stages(tmp_path / "w1", stages, workers=1)
    run_stages(tmp_path / "w2", stages, workers=2)
    info = _report(tmp_path / "w1")["classifier"]
    rejected = []
    for part in sorted((tmp_path / "w1/clean/rejected").glob("part-*.parquet")):
        rejected += [t for t in pq.read_table(part).column("text").to_pylist() if t.split()]
    assert info["status"] == "trained"
    assert 0 < info["clean_reject_docs"] < len(rejected)  # a prefix, cut by the budget
    assert sum(len(t) for t in rejected[: info["clean_reject_docs"]]) <= 2000
    assert info["pseudo_good_docs"] > 0
    assert 0 < info["sample_chars"] <= 6000  # features computed for at most train_max_chars
    assert not list((tmp_path / "w1").rglob("classifier-features"))  # temp files removed
    files = sorted(
        p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1/quality").rglob("*") if p.is_file()
    )
    assert Path("quality/model.npz") in files
    for rel in files:
        assert (tmp_path / "w1" / rel).read_bytes() == (tmp_path / "w2" / rel).read_bytes(), rel


def test_empty_part_from_upstream(tmp_path):
    """A part that an upstream filter emptied still yields an (empty) part-i: numbering holds."""
    from pipeline.config import build_config
    from pipeline.executor import Executor
    from pipeline.parts import docs_table, write_table
    from pipeline.stage import StageContext, StageInputs
    from pipeline.stages.quality import QualityConfig, run

    texts = [toy.good_doc(np.random.default_rng(i)) for i in range(30)] + ["spam spam " * 60] * 10
    parts = [tmp_path / "in/part-00000.parquet", tmp_path / "in/part-00001.parquet"]
    write_table(parts[0], docs_table([], [], []))
    write_table(parts[1], docs_table([f"d{i}" for i in range(40)], texts, ["t"] * 40))
    out = tmp_path / "out"
    out.mkdir()
    cfg = build_config(QualityConfig, {"min_train_docs": 5, "score": "mean"}, "quality")
    inputs = {"dedup": StageInputs.from_dir("dedup", tmp_path / "in")}
    ctx = StageContext("quality", tmp_path, out, 1, inputs, "dedup", Executor(1), False)
    result = run(cfg, ctx)
    stats = result.all_stats()
    assert stats["docs_in"] == 40 and stats["classifier"]["status"] == "trained"
    assert (
        "part-00000.parquet" in result.outputs and "rejected/part-00001.parquet" in result.outputs
    )
    assert pq.read_table(out / "part-00000.parquet").num_rows == 0
    assert result.all_stats()["docs_out"] == 30


# ---------------------------------------------------------------- the LM and coherence (default)


def _lm_rows(run: Path) -> list[dict]:
    rows = []
    for part in sorted((run / "quality").glob("**/part-*.parquet")):
        kept = "rejected" not in part.parts
        rows += [{**r, "kept": kept} for r in pq.read_table(part).to_pylist()]
    return rows


def _mixed(tmp_path: Path) -> tuple[Path, list[str]]:
    real = docs(90, 10)
    junk = salad(real[:30], 11) + [
        " ".join(np.random.default_rng(i).permutation(t.split())) for i, t in enumerate(real[30:60])
    ]
    texts = real + junk
    return _jsonl(tmp_path / "in.jsonl", texts), ["real"] * 90 + ["junk"] * 60


def test_default_keeps_real_text_and_drops_salad(tmp_path):
    src, kinds = _mixed(tmp_path)
    stages = {"download": {"source": "jsonl", "path": str(src), "docs_per_part": 50}, "quality": {}}
    run_stages(tmp_path / "run", stages)
    stats = _report(tmp_path / "run")
    assert stats["score"] == "combined" and stats["lm"]["status"] == "trained"
    assert stats["lm"]["reference"] == "self" and stats["lm"]["folds"] == 4
    rows = {r["id"]: r for r in _lm_rows(tmp_path / "run")}
    kept = np.array([rows[f"d{i}"]["kept"] for i in range(len(kinds))])
    real = np.array(kinds) == "real"
    assert kept[real].mean() >= 0.95 and (~kept[~real]).mean() >= 0.9
    r = rows["d0"]
    assert r["quality"] == pytest.approx(
        min(r["quality_heuristic"], r["quality_coherence"]), abs=1e-6
    )
    assert r["perplexity"] > 1.0 and r["context_gain"] > 0
    hist = stats["perplexity_histogram"]
    assert sum(hist["counts"]) == 150 and hist["threshold"] is None
    assert stats["per_script"]["latin"]["docs"] == 150
    assert stats["docs_in"] == stats["docs_out"] + stats["dropped_low_quality"]


def test_empty_texts_ending_a_part_are_dropped_not_a_crash(tmp_path):
    """Without a clean stage empty texts reach quality; two of them ending the input (the last
    text of a stats batch starts past the batch's characters) once raised an IndexError."""
    texts = docs(60, 12) + ["", ""]
    src = _jsonl(tmp_path / "in.jsonl", texts)
    stages = {"download": {"source": "jsonl", "path": str(src), "docs_per_part": 31}, "quality": {}}
    run_stages(tmp_path / "run", stages)
    stats = _report(tmp_path / "run")
    assert stats["lm"]["status"] == "trained"
    assert stats["dropped_no_words"] == 2
    assert stats["docs_in"] == 62 and stats["docs_out"] >= 54
    assert stats["docs_out"] == 62 - 2 - stats["dropped_low_quality"]


@pytest.mark.parametrize("folds,features", [("doc", 2), ("sentence", 2), ("sentence", 4)])
def test_same_bytes_for_one_or_two_workers(tmp_path, monkeypatch, folds, features):
    """With 2 workers the LM and classifier fits are worker tasks: the driver never fits
    (its fit functions raise here), and the bytes equal the inline run's (also with the
    per-sentence fold router, which travels in the scorer file, and with feature set 4, whose
    token surfaces travel in the temporary reference file)."""
    from pipeline.stages.quality import lm as stage_lm

    src, _ = _mixed(tmp_path)
    quality = {"coherence_folds": folds, "coherence_features": features}
    stages = {
        "download": {"source": "jsonl", "path": str(src), "docs_per_part": 40},
        "quality": quality,
    }
    run_stages(tmp_path / "w1", stages, workers=1)

    def not_in_the_driver(*args, **kwargs):
        raise AssertionError("a fit ran in the driver")

    monkeypatch.setattr(stage_lm, "fit_lm", not_in_the_driver)  # workers import their own
    monkeypatch.setattr(stage_lm, "fit_classifiers", not_in_the_driver)
    run_stages(tmp_path / "w2", stages, workers=2)
    files = sorted(
        p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1/quality").rglob("*.parquet")
    )
    assert len(files) >= 4
    for rel in files:
        assert (tmp_path / "w1" / rel).read_bytes() == (tmp_path / "w2" / rel).read_bytes(), rel
    assert not list((tmp_path / "w2/quality").glob(".*"))  # the workers' scorer file is gone


def test_all_junk_corpus_is_mostly_dropped(tmp_path):
    junk = salad(docs(60, 12), 13)
    src = _jsonl(tmp_path / "in.jsonl", junk)
    run_stages(tmp_path / "run", {"download": {"source": "jsonl", "path": str(src)}, "quality": {}})
    stats = _report(tmp_path / "run")
    # the reference is junk too, but context gain is an absolute rule: salad gains nothing
    assert stats["docs_out"] <= 0.1 * stats["docs_in"]


def test_unspaced_script_is_scored_by_the_lm_not_the_heuristic(tmp_path):
    texts = zh_docs(40, 14) + docs(40, 15)
    src = _jsonl(tmp_path / "in.jsonl", texts)
    run_stages(tmp_path / "run", {"download": {"source": "jsonl", "path": str(src)}, "quality": {}})
    stats = _report(tmp_path / "run")
    assert stats["per_script"]["cjk"]["lm_scored"] == 40
    assert stats["per_script"]["cjk"]["kept_share"] >= 0.9  # the heuristic alone drops them all
    assert stats["lm"]["heuristic_not_applied_unspaced_docs"] == 40


def test_file_reference_buckets_and_perplexity_cut(tmp_path):
    ref = _jsonl(tmp_path / "ref.jsonl", docs(50, 16))
    src = _jsonl(tmp_path / "in.jsonl", docs(40, 17))
    quality = {"reference": str(ref), "perplexity_buckets": True}
    stages = {"download": {"source": "jsonl", "path": str(src)}, "quality": quality}
    run_stages(tmp_path / "run", stages)
    stats = _report(tmp_path / "run")
    assert stats["lm"]["reference"] == f"file:{ref}" and stats["lm"]["reference_docs"] == 50
    buckets = [r["lm_bucket"] for r in _lm_rows(tmp_path / "run")]
    assert {b: buckets.count(b) for b in set(buckets)} == {"head": 12, "middle": 12, "tail": 16}
    assert set(stats["bucket_cutoffs_p30_p60"]) == {"latin"}
    # min_score 0: only the perplexity cut drops (coherence set 2 drops 1 of these 40 by score)
    stages["quality"] = {"reference": str(ref), "max_perplexity": 1.0, "min_score": 0.0}
    run_stages(tmp_path / "cut", stages)
    stats = _report(tmp_path / "cut")
    assert (
        stats["dropped_high_perplexity"] == 40 and stats["perplexity_histogram"]["threshold"] == 1.0
    )
    assert {tuple(r["reasons"]) for r in _lm_rows(tmp_path / "cut")} == {("high_perplexity",)}


def test_file_reference_is_cleaned_as_the_corpus(tmp_path):
    """A file reference holding the corpus's own documents, raw (full-width commas and
    ligatures that clean's NFKC folds): its texts are normalised as the corpus is, so each
    document keeps its fold key and every score equals the run's whose file is pre-normalised."""
    import unicodedata

    rng = np.random.default_rng(23)
    texts = [good_doc(rng).replace(", ", "\uff0c ").replace("fi", "\ufb01") for _ in range(60)]
    assert any(unicodedata.normalize("NFKC", t) != t for t in texts)
    src = _jsonl(tmp_path / "in.jsonl", texts)
    raw = _jsonl(tmp_path / "raw.jsonl", texts)
    folded = _jsonl(tmp_path / "nfkc.jsonl", [unicodedata.normalize("NFKC", t) for t in texts])
    scores = []
    for name, ref in (("raw", raw), ("nfkc", folded)):
        stages = {
            "download": {"source": "jsonl", "path": str(src)},
            "clean": {},
            "quality": {"reference": str(ref), "min_score": 0.0},
        }
        run_stages(tmp_path / name, stages)
        rows = sorted(_lm_rows(tmp_path / name), key=lambda r: r["id"])
        scores.append([(r["id"], r["quality"], r["perplexity"]) for r in rows])
    assert len(scores[0]) > 40 and scores[0] == scores[1]


def test_reference_errors(tmp_path):
    src = _jsonl(tmp_path / "in.jsonl", docs(30, 18))
    base = {"download": {"source": "jsonl", "path": str(src)}}
    with pytest.raises(RecipeError, match="quality.reference: .*neither 'self', a builtin"):
        run_stages(tmp_path / "a", {**base, "quality": {"reference": str(tmp_path / "nope.jsonl")}})
    small = _jsonl(tmp_path / "small.jsonl", docs(3, 19))
    with pytest.raises(DataError, match="too small to train the LM.*min_reference_docs"):
        run_stages(tmp_path / "b", {**base, "quality": {"reference": str(small)}})
    with pytest.raises(RecipeError, match="model_path: a saved pseudo-label model needs score"):
        run_stages(tmp_path / "c", {**base, "quality": {"model_path": str(small)}})
    one = _jsonl(tmp_path / "one.jsonl", docs(1, 20))
    stages = {
        "download": {"source": "jsonl", "path": str(one)},
        "quality": {"on_no_spread": "error"},
    }
    with pytest.raises(DataError, match="quality.reference: reference self too small"):
        run_stages(tmp_path / "d", stages)


def test_builtin_reference_through_the_download_code(tmp_path, monkeypatch):
    """`reference: tinystories` reads the builtin like download.source does (local server)."""
    from http_server import LocalServer

    stories = "\n<|endoftext|>\n".join(docs(40, 21)) + "\n"
    src = _jsonl(tmp_path / "in.jsonl", docs(30, 22))
    with LocalServer() as server:
        server.files["TinyStories-valid.txt"] = stories.encode()
        monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", server.url)
        quality = {"reference": "tinystories"}
        stages = {"download": {"source": "jsonl", "path": str(src)}, "quality": quality}
        run_stages(tmp_path / "run", stages)
    stats = _report(tmp_path / "run")
    assert stats["lm"]["reference"] == "builtin:tinystories"
    # the synthetic documents are random nouns in templates, topic-free by construction: the
    # document-scale coherence features (issue 23) may doubt one of them
    assert stats["lm"]["reference_docs"] == 40 and stats["docs_out"] >= 28


def _untimed(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if not k.endswith(("_per_s", "seconds"))}


@pytest.mark.parametrize("rule", ["keep_fraction", "pareto"])
def test_exact_global_steps_same_bytes_whatever_the_refinement(tmp_path, monkeypatch, rule):
    """keep_fraction's cut, the decile examples, the perplexity median and bucket cut-offs are
    found by per-part histogram rounds: forcing every round (gather cap 1) on 1 or 2 workers
    writes the same bytes as the default (one gather); no per-part temp file is left."""
    from pipeline.quality import rank

    src, _ = _mixed(tmp_path)
    quality = {"keep_rule": rule, "keep_fraction": 0.55, "perplexity_buckets": True}
    download = {"source": "jsonl", "path": str(src), "docs_per_part": 17}
    stages = {"download": download, "quality": quality}
    base = tmp_path / "default"
    run_stages(base, stages)
    files = sorted(p.relative_to(base) for p in (base / "quality").rglob("*.parquet"))
    assert len(files) >= 10
    monkeypatch.setattr(rank, "GATHER", 1)
    for w in (1, 2):
        run = tmp_path / f"w{w}"
        run_stages(run, stages, workers=w)
        for rel in files:
            assert (run / rel).read_bytes() == (base / rel).read_bytes(), rel
        assert not list((run / "quality").glob(".*"))
        assert _untimed(_report(run)) == _untimed(_report(base))
    stats = _report(base)
    assert len(stats["decile_examples"]) == 10
    assert set(stats["bucket_cutoffs_p30_p60"]) == {"latin"}


def test_hidden_label_auc_is_capped_to_the_first_parts(tmp_path, monkeypatch):
    """Above AUC_MAX_DOCS documents the AUCs are exact over the first whole parts that fit."""
    from pipeline.stages.quality import parttasks

    stages = {
        "download": {"source": "toy", "max_docs": 300, "docs_per_part": 100},
        "quality": {"score": "heuristic"},
    }
    run_stages(tmp_path / "all", stages)
    monkeypatch.setattr(parttasks, "AUC_MAX_DOCS", 150)
    run_stages(tmp_path / "cap", stages)
    full, cap = (_report(tmp_path / r)["hidden_label_auc"] for r in ("all", "cap"))
    assert "docs_capped_at" not in full and cap["docs_capped_at"] == 100
    rows = pq.read_table(tmp_path / "cap/download/part-00000.parquet").to_pylist()
    kinds = [r["label"] for r in rows]
    good = np.array([k == "good" for k in kinds])
    target = good | np.isin(kinds, parttasks.QUALITY_JUNK)
    assert cap["docs"] == int(target.sum()) < full["docs"]
    scored = {r["id"]: r["quality_heuristic"] for r in _rows(tmp_path / "cap")}
    s = np.array([scored[r["id"]] for r in rows])  # float32 copies: equal up to rounding
    assert cap["auc_heuristic"] == pytest.approx(roc_auc(s[target], good[target]), abs=2e-3)


def test_self_reference_drawn_in_rounds_writes_the_same_bytes(tmp_path, monkeypatch):
    """The `self` reference is read from the download parts in rounds of draw positions: many
    small rounds (a tiny first share, later rounds aiming short) choose the same reference, so
    1 or 2 workers and either round size write the same bytes."""
    from pipeline.stages.quality import lm

    src, _ = _mixed(tmp_path)
    stages = {"download": {"source": "jsonl", "path": str(src), "docs_per_part": 40}, "quality": {}}
    run_stages(tmp_path / "w1", stages, workers=1)
    monkeypatch.setattr(lm, "REF_OVERSAMPLE", 1e-4)  # a tiny first round
    monkeypatch.setattr(lm, "REF_MARGIN", 0.3)  # each next one aims short: several rounds
    run_stages(tmp_path / "w2", stages, workers=2)
    stats = _report(tmp_path / "w1")
    assert stats["lm"]["status"] == "trained" and stats["lm"]["reference_docs"] >= 20
    assert _report(tmp_path / "w2")["lm"]["reference_docs"] == stats["lm"]["reference_docs"]
    files = sorted(
        p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1/quality").rglob("*.parquet")
    )
    assert len(files) >= 4
    for rel in files:
        assert (tmp_path / "w1" / rel).read_bytes() == (tmp_path / "w2" / rel).read_bytes(), rel


def test_self_reference_reads_clean_kept_parts_when_clean_ran_with_its_defaults(
    tmp_path, monkeypatch
):
    """When clean ran with its defaults (the reference's rule), the draw reads clean's kept
    parts instead of cleaning the drawn documents again: the same reference texts (normalised,
    redacted; the documents clean dropped left out), in the same order, with no clean call."""
    import dataclasses

    from pipeline.executor import Executor
    from pipeline.stage import StageContext, StageInputs
    from pipeline.stages.clean import CleanConfig
    from pipeline.stages.quality import lm
    from pipeline.stages.quality.config import QualityConfig

    rng = np.random.default_rng(12)
    real = [good_doc(rng) for _ in range(60)]
    texts = [
        t + " Mail ann@example.com &amp; more." if i % 3 == 0 else t for i, t in enumerate(real)
    ]
    texts += [" ".join(t.split()[:20]) + "." for t in real[:20]]  # under 50 words: clean drops
    src = _jsonl(tmp_path / "in.jsonl", texts)
    stages = {"download": {"source": "jsonl", "path": str(src), "docs_per_part": 25}, "clean": {}}
    run_stages(tmp_path / "run", stages)
    run = tmp_path / "run"
    assert list((run / "clean" / "rejected").glob("part-*"))  # clean dropped some
    cfg = dataclasses.replace(QualityConfig(), reference_max_chars=20_000)

    def ctx(config):
        clean = dataclasses.replace(StageInputs.from_dir("clean", run / "clean"), config=config)
        inputs = {"download": StageInputs.from_dir("download", run / "download"), "clean": clean}
        return StageContext("quality", run, run / ".q", 5, inputs, "clean", Executor(1), False)

    again = lm.self_reference(cfg, ctx(None))  # unknown config: cleaned again
    assert lm.clean_is_reference(CleanConfig()) and not lm.clean_is_reference(None)
    assert not lm.clean_is_reference(CleanConfig(min_words=30))
    assert not lm.clean_is_reference(CleanConfig(detect_language=True))
    assert lm.clean_is_reference(CleanConfig(url_field="link"))  # no block list: moves nothing

    def no_clean(*a, **k):
        raise AssertionError("cleaned again")

    monkeypatch.setattr(lm, "clean_texts", no_clean)
    reused = lm.self_reference(cfg, ctx(CleanConfig()))
    assert reused == again and 10 <= len(again) < 60  # the budget stopped the draw
    assert any("Mail" in t for t in again)  # documents clean changed: their cleaned text
    assert all("&amp;" not in t and "ann@example.com" not in t for t in again)


def _clean_run(tmp_path: Path, name: str, clean: dict) -> Path:
    """download + clean of 60 real documents (a third with an address and an entity, some
    short, some long) and 20 shorts of 20 words, in parts of 25."""
    rng = np.random.default_rng(12)
    real = [good_doc(rng) for _ in range(60)]
    texts = [
        t + " Mail ann@example.com &amp; more." if i % 3 == 0 else t for i, t in enumerate(real)
    ]
    texts += [" ".join(t.split()[:20]) + "." for t in real[:20]]  # under 50 words
    src = _jsonl(tmp_path / f"{name}.jsonl", texts)
    stages = {"download": {"source": "jsonl", "path": str(src), "docs_per_part": 25}}
    run_stages(tmp_path / name, {**stages, "clean": clean})
    return tmp_path / name


def _quality_ctx(run: Path, config):
    import dataclasses

    from pipeline.executor import Executor
    from pipeline.stage import StageContext, StageInputs

    clean = dataclasses.replace(StageInputs.from_dir("clean", run / "clean"), config=config)
    inputs = {"download": StageInputs.from_dir("download", run / "download"), "clean": clean}
    return StageContext("quality", run, run / ".q", 5, inputs, "clean", Executor(1), False)


@pytest.mark.parametrize(
    "clean",
    [
        {"max_fineweb_dup_line_chars_frac": 0.1, "min_words": 30},  # loosened: keeps more
        {"min_words": 120, "max_fineweb_dup_line_chars_frac": None},  # tightened: drops some
    ],
)
@pytest.mark.parametrize("budget", [20_000, 10**9])
def test_self_reference_reads_clean_default_rule_parts_for_a_threshold_only_config(
    tmp_path, monkeypatch, clean, budget
):
    """clean with other thresholds than its defaults writes default_rule/ parts (which rows its
    defaults keep, with the cleaned text of those it dropped itself); the draw reads them and
    clean's kept parts: the same reference as cleaning the drawn documents again, no clean
    call. Tightened, some reference documents come from default_rule/ texts alone."""
    import dataclasses

    from pipeline.stages.clean import CleanConfig
    from pipeline.stages.quality import lm
    from pipeline.stages.quality.config import QualityConfig

    run = _clean_run(tmp_path, "run", clean)
    rule = sorted((run / "clean" / "default_rule").glob("part-*.parquet"))
    assert len(rule) == len(list((run / "clean").glob("part-*.parquet"))) == 4
    extra = [t for p in rule for t in pq.read_table(p).column("text").to_pylist() if t]
    kept = {t for p in (run / "clean").glob("part-*.parquet") for t in pq.read_table(p)["text"]}
    assert (len(extra) > 0) == ("min_words" in clean and clean["min_words"] > 50)
    cfg = dataclasses.replace(QualityConfig(), reference_max_chars=budget)
    again = lm.self_reference(cfg, _quality_ctx(run, None))  # unknown config: cleaned again

    def no_clean(*a, **k):
        raise AssertionError("cleaned again")

    monkeypatch.setattr(lm, "clean_texts", no_clean)
    reused = lm.self_reference(cfg, _quality_ctx(run, CleanConfig(**clean)))
    assert reused == again and len(again) >= 10
    assert all("&amp;" not in t and "ann@example.com" not in t for t in again)
    if budget > 10**6 and extra:  # every eligible document: some clean itself dropped
        assert set(extra) <= set(again) and not set(extra) & kept
    c, d = run / "clean", run / "download"  # kept rows of another part: ids differ, None
    item = lm.DrawPart(0, d / "part-00000.parquet", c / "part-00001.parquet", rule[0])
    assert lm._drawn_by_rule(item, 0.0, 1.0, 5) is None
    item = lm.DrawPart(0, d / "part-00000.parquet", c / "part-00000.parquet", rule[0])
    assert len(lm._drawn_by_rule(item, 0.0, 1.0, 5)[1]) == pq.read_table(rule[0]).num_rows


def test_self_reference_cleans_again_after_a_text_changing_clean(tmp_path, monkeypatch):
    """A clean config that changes texts (here: no whitespace folding) or the statistics
    (max_chars) writes no default_rule/ parts, and the draw cleans the drawn documents again."""
    import dataclasses

    from pipeline.stages import clean as clean_stage
    from pipeline.stages.clean import CleanConfig
    from pipeline.stages.quality import lm
    from pipeline.stages.quality.config import QualityConfig

    assert not clean_stage.shares_default_stats(CleanConfig())  # the defaults: kept parts
    assert clean_stage.shares_default_stats(CleanConfig(min_words=10, drop_lorem_ipsum=False))
    for bad in ({"fold_whitespace": False}, {"max_chars": 10**5}, {"redact_pii": []}):
        assert not clean_stage.shares_default_stats(CleanConfig(min_words=10, **bad)), bad
    assert not clean_stage.shares_default_stats(CleanConfig(min_words_per_line=3))
    assert not clean_stage.shares_default_stats(CleanConfig(detect_language=True))
    run = _clean_run(tmp_path, "run", {"fold_whitespace": False, "min_words": 30})
    assert not (run / "clean" / "default_rule").exists()
    calls = []
    real = lm.clean_texts
    monkeypatch.setattr(lm, "clean_texts", lambda t, c: calls.append(len(t)) or real(t, c))
    cfg = dataclasses.replace(QualityConfig(), reference_max_chars=20_000)
    ref = lm.self_reference(
        cfg, _quality_ctx(run, CleanConfig(fold_whitespace=False, min_words=30))
    )
    assert calls and len(ref) >= 10


def _spliced(tmp_path: Path) -> tuple[Path, list[str]]:
    """90 real documents, 10 splices (the sentences of 3 real documents each, interleaved, to a
    real document's length) and 5 copies of real documents with their sentences reversed."""
    rng = np.random.default_rng(31)
    real = docs(90, 30)
    sents = [[s.strip() + "." for s in t.split(".") if s.strip()] for t in real]
    splices = []
    for j in range(10):
        src = [sents[3 * j + k] for k in range(3)]
        picks = [s for k, ss in enumerate(src) for s in ss[k * 3 : k * 3 + 4]]
        splices.append(" ".join(picks[i] for i in rng.permutation(len(picks))))
    copies = [" ".join(reversed(sents[60 + j])) for j in range(5)]
    texts = real + splices + copies
    kinds = ["real"] * 90 + ["splice"] * 10 + ["copy"] * 5
    return _jsonl(tmp_path / "in.jsonl", texts), kinds


def test_splice_gate_drops_documents_stitched_from_others_and_the_reference_leaves_them_out(
    tmp_path,
):
    src, kinds = _spliced(tmp_path)
    kinds = np.array(kinds)
    out = {}
    for gate in (True, False):
        stages = {
            "download": {"source": "jsonl", "path": str(src), "docs_per_part": 40},
            "quality": {"splice_gate": gate},
        }
        run_stages(tmp_path / f"g{gate}", stages)
        rows = {r["id"]: r for r in _lm_rows(tmp_path / f"g{gate}")}
        out[gate] = [rows[f"d{i}"] for i in range(len(kinds))]
    on, off = out[True], out[False]
    share = np.array([r["splice_share"] for r in on])
    assert (share[kinds == "splice"] > 0.5).all()  # ~2/3: 4 of 12 sentences from each source
    assert (share[kinds != "splice"] < 0.2).all()  # copies: one partner; sources: a part
    assert not any(r["kept"] for r, k in zip(on, kinds, strict=True) if k == "splice")
    assert all(
        r["quality_coherence"] == 0.0 for r, k in zip(on, kinds, strict=True) if k == "splice"
    )
    assert "splice_share" not in off[0]
    # no real document is gated (share < 0.2 above); their scores move (the self reference
    # leaves out the splices, so the classifiers are refitted), real text stays kept
    for g in out:
        assert np.mean([r["kept"] for r in out[g][:90]]) >= 0.9
    lm_on, lm_off = _report(tmp_path / "gTrue")["lm"], _report(tmp_path / "gFalse")["lm"]
    stats = lm_on["splice"]
    assert stats["docs_gated"] == stats["docs_gated_below_half"] == 10
    assert stats["sampled_share"] == 1.0 and stats["docs_judged"] == len(kinds)
    assert lm_on["reference_splices_left_out"] == 10
    assert lm_on["reference_docs"] == lm_off["reference_docs"] - 10
    assert "splice" not in lm_off and "reference_splices_left_out" not in lm_off


def test_splice_rows_above_the_cap_are_a_hash_sample_the_same_for_any_worker_count(
    tmp_path, monkeypatch
):
    from pipeline.stages.quality import lm as stage_lm

    monkeypatch.setattr(stage_lm, "SPLICE_MAX_ROWS", 400)
    src, _ = _spliced(tmp_path)
    stages = {"download": {"source": "jsonl", "path": str(src), "docs_per_part": 40}, "quality": {}}
    run_stages(tmp_path / "w1", stages, workers=1)
    stats = _report(tmp_path / "w1")["lm"]["splice"]
    assert stats["sentence_rows"] > 400 and 0.0 < stats["sampled_share"] < 1.0
    run_stages(tmp_path / "w2", stages, workers=2)
    files = sorted(
        p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1/quality").rglob("*.parquet")
    )
    for rel in files:
        assert (tmp_path / "w1" / rel).read_bytes() == (tmp_path / "w2" / rel).read_bytes(), rel

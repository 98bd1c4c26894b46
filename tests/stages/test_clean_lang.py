"""clean's language ID (issue 24): `lang`/`lang_score` columns, `clean.languages` as the
`language` reason, per-language counts, stop words judged only in their language, identical
bytes for any worker count, and the one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import make_recipe, run_stages
from pipeline.clean import langid
from pipeline.clean.rules import RULE_NAMES
from pipeline.config import build_config
from pipeline.errors import RecipeError
from pipeline.inspect import inspect_rejected
from pipeline.manifest import Manifest
from pipeline.report import load_report
from pipeline.stages.clean import CleanConfig, clean_texts
from synth_lang import pages

pytest.importorskip("py3langid")

MIX = ["en"] * 6 + ["it"] * 4 + ["es"] * 4 + ["de"] * 4  # pages of the test corpus, in order
SEED = 3  # a seed whose pages pass every rule but the language-specific ones


def _reasons(cfg: dict, texts: list[str]) -> list[list[str]]:
    batch = clean_texts(texts, build_config(CleanConfig, cfg, "clean"))
    return [[RULE_NAMES[j] for j in np.flatnonzero(row)] for row in batch.fails]


def test_stop_word_rule_judges_only_its_language():
    """Without language ID the English stop-word rule drops every Italian, Spanish and German
    page (the issue's bug); with it, those pages have no stop-word statistic and are kept, and
    English pages are still judged: one stripped of its stop words is dropped."""
    texts = pages(MIX, SEED)
    plain = _reasons({}, texts)
    assert all(r == [] for r in plain[:6])
    assert all(r == ["gopher_stop_words_v1"] for r in plain[6:])
    assert all(r == [] for r in _reasons({"detect_language": True}, texts))
    stripped = " ".join(w for w in texts[0].split() if w.lower() not in ("the", "a", "to", "and"))
    assert "gopher_stop_words_v1" in _reasons({"detect_language": True}, [stripped])[0]


def test_languages_drop_as_language_first():
    texts = pages(MIX, SEED)
    got = _reasons({"languages": ["en", "de"]}, texts)
    assert [bool(r) for r in got] == [lang not in ("en", "de") for lang in MIX]
    assert all(r[0] == "language" for r in got if r)
    # min_lang_score: every synthetic page scores above 0.99, none above 1
    batch = clean_texts(texts, build_config(CleanConfig, {"detect_language": True}, "clean"))
    assert batch.langs == MIX and float(batch.lang_scores.min()) > 0.99
    strict = _reasons({"languages": ["en", "it", "es", "de"], "min_lang_score": 1.0}, texts)
    assert all(r == ["language"] for r in strict)


def test_chinese_varieties_count_as_chinese():
    """Cantonese and Wu (py3langid's yue, wuu) fold into their macrolanguage zh: a two-word
    food review py3langid alone calls `yue` is `zh` here."""
    assert "yue" not in langid.model().labels and "zh" in langid.model().labels
    langs, scores = langid.identify(["牛肉粉儿好吃好吃！"])
    assert langs == ["zh"] and scores[0] > 0.65


def test_undetermined_text_scores_zero():
    langs, scores = langid.identify(["", "1234 5678 !!!", "Der Fluss war ruhig und kalt."])
    assert langs[:2] == [langid.UNDETERMINED] * 2 and scores[:2].tolist() == [0.0, 0.0]
    assert langs[2] == "de" and 0.5 < scores[2] <= 1.0


@pytest.fixture(scope="module")
def lang_runs(tmp_path_factory):
    """The mixed corpus in 3 parts, cleaned with languages [en, it] by 1 and 2 workers."""
    tmp = tmp_path_factory.mktemp("lang")
    src = tmp / "in.jsonl"
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(pages(MIX, SEED))]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    runs = {}
    for workers in (1, 2):
        out = tmp / f"w{workers}"
        stages = {
            "download": {"source": "jsonl", "path": str(src), "docs_per_part": 6},
            "clean": {"languages": ["en", "it"]},
        }
        run_stages(out, stages, workers=workers)
        runs[workers] = out
    return runs


def _stats(run_dir):
    return next(s for s in load_report(run_dir)["stages"] if s["stage"] == "clean")["stats"]


def test_stage_columns_counts_report_and_inspect(lang_runs):
    out = lang_runs[1]
    kept = [
        r
        for p in sorted((out / "clean").glob("part-*.parquet"))
        for r in pq.read_table(p).to_pylist()
    ]
    assert [r["lang"] for r in kept] == ["en"] * 6 + ["it"] * 4
    assert all(0.99 < r["lang_score"] <= 1.0 for r in kept)
    rejected = pq.read_table(out / "clean" / "rejected" / "part-00002.parquet").to_pylist()
    assert {r["lang"] for r in rejected} == {"es", "de"}
    assert all(r["reasons"] == ["language"] for r in rejected)
    st = _stats(out)
    assert st["docs_in"] == 18 and st["docs_out"] == 10 and st["dropped_language"] == 8
    assert st["docs_per_language"] == {"en": 6, "de": 4, "es": 4, "it": 4}
    assert st["kept_per_language"] == {"en": 6, "de": 0, "es": 0, "it": 4}
    hist = st["histograms"]["language"]
    assert hist["threshold"] == 0.65 and hist["key"] == "clean.min_lang_score"
    assert sum(hist["counts"]) == 18 and hist["counts"][0] == 8  # other languages: -1, bin 0
    shown = inspect_rejected(out, "clean", "language", 2, 80)
    assert "reasons: language=8" in shown and "lang=" in shown
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "clean: documents per language" in html
    assert "<td>de</td>" in html or ">de<" in html


def test_stage_bytes_identical_for_any_worker_count(lang_runs):
    def hashes(run):
        return {o["path"]: o["sha256"] for o in Manifest.load(run).stages["clean"]["outputs"]}

    assert hashes(lang_runs[1]) == hashes(lang_runs[2])


def test_default_has_no_language_columns(tmp_path):
    out = tmp_path / "run"
    run_stages(out, {"download": {"source": "toy", "max_docs": 40}, "clean": None})
    cols = pq.read_schema(out / "clean" / "part-00000.parquet").names
    assert "lang" not in cols and "lang_score" not in cols
    st = _stats(out)
    assert "docs_per_language" not in st and st["rules"]["language"]["threshold"] is None


def test_language_recipe_errors(tmp_path, monkeypatch):
    def recipe(clean):
        make_recipe(tmp_path, {"download": {"source": "toy"}, "clean": clean})

    with pytest.raises(RecipeError, match=r"clean.languages\[1\]: got 'eng'.*did you mean 'en'"):
        recipe({"languages": ["de", "eng"]})
    with pytest.raises(
        RecipeError, match=r"clean.languages\[0\]: got 'yue', which counts as .*: list zh"
    ):
        recipe({"languages": ["yue"]})
    with pytest.raises(RecipeError, match="clean.languages: an empty list would drop every"):
        recipe({"languages": []})
    monkeypatch.setattr(langid, "available", lambda: False)
    with pytest.raises(RecipeError, match=r"clean.languages: language ID needs the langid extra"):
        recipe({"languages": ["en"]})
    with pytest.raises(RecipeError, match=r"clean.detect_language: language ID needs"):
        recipe({"detect_language": True})

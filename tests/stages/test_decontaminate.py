"""The decontaminate stage: WikiText-style eval passages (written here, in WikiText's tokenised
style) planted in a training mix, detokenised and re-cased, are all found; unrelated text and a
12-word overlap are not; drop and mark modes; per-eval-file counts; bad eval files."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.dedup import decontam
from pipeline.errors import DataError, RecipeError
from pipeline.executor import Executor
from pipeline.inspect import inspect_rejected
from pipeline.parts import docs_table, part_name, write_table
from pipeline.stage import StageContext, StageInputs
from pipeline.stages import decontaminate
from pipeline.stages.decontaminate import REASON, DecontaminateConfig
from synth_text import docs as synth_docs

SYLLABLES = "ka lo mi re su ta vo ne ri zu pa che dor ven ith al".split()


def _article(rng: np.random.Generator, sentences: int) -> list[str]:
    """WikiText-style tokenised sentences over invented words: ' @-@ ', ' , ', ' 's '."""
    out = []
    for _ in range(sentences):
        words = ["".join(rng.choice(SYLLABLES, 3)) for _ in range(int(rng.integers(14, 22)))]
        words[3] = f"{words[3]} @-@ {words[4]}"
        words[6] = f"{words[6]} 's"
        words[9] += " ,"
        out.append(" ".join(words).capitalize() + " .")
    return out


def _detokenise(s: str) -> str:
    """How the same sentence reads in a web page: 'a-b', "x's", 'y,' and upper case."""
    return s.replace(" @-@ ", "-").replace(" 's", "'s").replace(" ,", ",").replace(" .", ".")


@pytest.fixture
def mix(tmp_path):
    """Two eval files and 4 training parts: 60 unrelated documents, 8 with a planted passage
    (wiki: 5, qa: 3), one with a 12-word overlap only."""
    rng = np.random.default_rng(5)
    wiki = [_article(rng, 4) for _ in range(6)]
    lines = []
    for k, art in enumerate(wiki):
        lines += [f" = Article {k} = ", ""] + [" " + " ".join(art), ""]
    (tmp_path / "wiki.test.txt").write_text("\n".join(lines), encoding="utf-8")
    qa = [" ".join(_article(rng, 2)) for _ in range(4)]
    with open(tmp_path / "qa.jsonl", "w", encoding="utf-8") as f:
        for q in qa:
            f.write(json.dumps({"text": q}) + "\n")
    texts = synth_docs(60, seed=6, sentences=8)
    planted = {}
    for j, d in enumerate([3, 11, 20, 34, 47]):  # a detokenised wiki sentence, upper-cased
        texts[d] = f"{texts[d]} {_detokenise(wiki[j][1]).upper()} {texts[d + 1]}"
        planted[d] = "wiki.test.txt"
    for j, d in enumerate([7, 29, 55]):  # a 13-word window of a qa record, mid-document
        window = " ".join(_detokenise(qa[j]).split()[5:18])
        texts[d] = f"{texts[d][:200]} {window} {texts[d][200:]}"
        planted[d] = "qa.jsonl"
    twelve = " ".join(decontam.words(wiki[5][2])[:12])  # one word short of an n-gram
    texts[40] = f"{texts[40]} {twelve}."
    for i, lo in enumerate(range(0, 60, 15)):
        ids = [f"t{k}" for k in range(lo, lo + 15)]
        write_table(
            tmp_path / "in" / part_name(i), docs_table(ids, texts[lo : lo + 15], ["web"] * 15)
        )
    return tmp_path, planted


def _run(tmp_path, workers: int = 1, name: str = "out", **cfg):
    out = tmp_path / name
    out.mkdir()
    cfg.setdefault("eval_texts", [str(tmp_path / "wiki.test.txt"), str(tmp_path / "qa.jsonl")])
    with Executor(workers) as ex:
        ctx = StageContext(
            name="decontaminate",
            run_dir=tmp_path,
            out_dir=out,
            seed=1,
            inputs={"download": StageInputs.from_dir("download", tmp_path / "in")},
            upstream="download",
            executor=ex,
            progress=False,
        )
        return decontaminate.run(DecontaminateConfig(**cfg), ctx), out


def _rows(folder):
    return [r for p in sorted(folder.glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


def test_planted_passages_are_all_found_and_nothing_else(mix):
    tmp_path, planted = mix
    res, out = _run(tmp_path)
    stats = res.all_stats()
    rejected = _rows(out / "rejected")
    wiki, qa = (str(tmp_path / n) for n in ("wiki.test.txt", "qa.jsonl"))
    got = {int(r["id"][1:]): r["contaminated"] for r in rejected}
    assert got == {d: [wiki if e == "wiki.test.txt" else qa] for d, e in planted.items()}
    assert all(r["reasons"] == [REASON] for r in rejected)
    assert stats["docs_out"] == 60 - 8 and stats[f"dropped_{REASON}"] == 8
    assert stats["contaminated_docs_by_eval"] == {wiki: 5, qa: 3}
    assert [e["records"] for e in stats["eval_files"]] == [1, 4]
    for r in rejected:  # the shared n-gram is 13 normalised words of the document
        words = r["matched_ngram"].split()
        assert len(words) == 13 and r["matched_ngram"] in " ".join(decontam.words(r["text"]))
    shown = inspect_rejected(tmp_path, "out", REASON, 2, 60)
    assert f"{REASON}=8" in shown and "matched_ngram=" in shown
    assert stats["examples"][0]["ngram"] == rejected[0]["matched_ngram"]


def test_mark_mode_keeps_all_and_is_the_same_for_any_worker_count(mix):
    tmp_path, planted = mix
    res, out = _run(tmp_path, mode="mark")
    rows = _rows(out)
    assert len(rows) == 60 and not (out / "rejected").exists()
    assert {int(r["id"][1:]) for r in rows if r["contaminated"]} == set(planted)
    assert all(r["matched_ngram"] is None for r in rows if not r["contaminated"])
    assert res.all_stats()["contaminated_docs"] == 8
    _, two = _run(tmp_path, workers=2, name="w2", mode="mark")
    for p in sorted(out.glob("*.parquet")):
        assert p.read_bytes() == (two / p.name).read_bytes()


def test_normalisation_matches_gpt3_style_words():
    assert decontam.words("The game 's @-@ start, (2010)!") == ["the", "game", "s", "start", "2010"]
    assert decontam.words("The game's-start 2010") == ["the", "game", "s", "start", "2010"]
    assert decontam.words("Ünïcode_wörds") == ["ünïcode", "wörds"]
    a, _ = decontam.text_ngrams(["Alpha beta, gamma"], 3)
    b, _ = decontam.text_ngrams(["ALPHA -- beta gamma!"], 3)
    c, _ = decontam.text_ngrams(["alpha gamma beta"], 3)
    assert len(a) == 1 and a[0] == b[0] != c[0]
    grams, doc = decontam.text_ngrams(["a b c", "d e f"], 4)  # never across two texts
    assert len(grams) == 0


def test_bad_eval_files(mix):
    tmp_path, _ = mix
    with pytest.raises(DataError, match="missing.txt.*no such file"):
        _run(tmp_path, name="a", eval_texts=[str(tmp_path / "missing.txt")])
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\nnot json\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.jsonl:2.*bad JSON"):
        _run(tmp_path, name="b", eval_texts=[str(tmp_path / "bad.jsonl")])
    from pipeline.config import build_config

    with pytest.raises(RecipeError, match="decontaminate.eval_texts"):
        build_config(DecontaminateConfig, {}, "decontaminate")


def test_empty_parts_texts_and_a_rerun_on_marked_output(mix):
    """An empty part, empty texts and an eval file shorter than one n-gram; then drop mode on
    the marked output (its columns are replaced, not duplicated)."""
    tmp_path, planted = mix
    write_table(tmp_path / "in" / part_name(4), docs_table([], [], []))
    write_table(tmp_path / "in" / part_name(5), docs_table(["e0", "e1"], ["", " ,. "], ["w"] * 2))
    (tmp_path / "short.txt").write_text("only five words in here", encoding="utf-8")
    evals = [str(tmp_path / n) for n in ("wiki.test.txt", "qa.jsonl", "short.txt")]
    res, marked = _run(tmp_path, name="m", mode="mark", eval_texts=evals)
    assert [e["ngrams"] for e in res.stats["eval_files"]][2] == 0
    assert res.all_stats()["docs_out"] == 62 and res.stats["contaminated_docs"] == len(planted)
    again = tmp_path / "again"
    again.mkdir()
    with Executor(1) as ex:
        ctx = StageContext(
            name="decontaminate",
            run_dir=tmp_path,
            out_dir=again,
            seed=1,
            inputs={"decontaminate": StageInputs.from_dir("decontaminate", marked)},
            upstream="decontaminate",
            executor=ex,
            progress=False,
        )
        res = decontaminate.run(DecontaminateConfig(eval_texts=evals), ctx)
    assert res.all_stats()[f"dropped_{REASON}"] == len(planted)
    names = pq.read_table(again / "rejected" / part_name(0)).column_names
    assert names.count("contaminated") == 1 and names.count("matched_ngram") == 1

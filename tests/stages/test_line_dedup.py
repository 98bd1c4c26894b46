"""The line_dedup stage: lines (or paragraphs) shared across documents stay only in the first
document by the seeded order; a document left too short is dropped with its own reason; the
bytes are the same for any worker count and partitioning."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from helpers import run_stage_on_parts
from pipeline.dedup import lines
from pipeline.inspect import inspect_rejected
from pipeline.parts import docs_table, part_name
from pipeline.stages import line_dedup
from pipeline.stages.line_dedup import REASON, LineDedupConfig
from synth_text import sentence

NAV = [f"Home | Products | Blog | Page {k} of the site menu" for k in range(12)]
FOOTER = [f"Copyright 2024 Example Corp. Footer link {k}: privacy, terms" for k in range(15)]
SHARED = NAV + FOOTER  # 27 boilerplate lines in every page
SEED = 11


def _page(d: int, rng: np.random.Generator, body_lines: int = 6) -> str:
    body = [
        f"doc{d} line{k}: " + " ".join(sentence(rng) for _ in range(3)) for k in range(body_lines)
    ]
    return "\n".join(NAV + body + FOOTER)


def _run(tmp_path, parts: list[pa.Table], workers: int = 1, name: str = "out", **cfg):
    return run_stage_on_parts(
        tmp_path, parts, line_dedup, LineDedupConfig(**cfg), workers, SEED, name
    )


def _parts(texts: list[str], per: int) -> list[pa.Table]:
    return [
        docs_table(
            [f"d{i}" for i in range(lo, min(lo + per, len(texts)))],
            texts[lo : lo + per],
            ["web"] * len(texts[lo : lo + per]),
        )
        for lo in range(0, len(texts), per)
    ]


def _kept(out) -> dict[str, str]:
    rows = [r for p in sorted(out.glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]
    return {r["id"]: r["text"] for r in rows}


def test_27_shared_lines_stay_only_in_the_first_document_by_seeded_order(tmp_path):
    rng = np.random.default_rng(0)
    n = 30
    texts = [_page(d, rng) for d in range(n)]
    res, out = _run(tmp_path, _parts(texts, 8))
    kept = _kept(out)
    assert len(kept) == n  # every page keeps its 6 body lines (> 50 words)
    # the first document by seeded order: smallest key over the global rows
    first = f"d{int(np.argmin(lines.doc_keys(0, n, SEED)))}"
    assert first != "d0"  # the order is seeded, not the row order (for this seed)
    for doc_id, text in kept.items():
        got = set(text.split("\n"))
        assert (set(SHARED) <= got) == (doc_id == first)
        assert not (set(SHARED) & got) or doc_id == first
        d = int(doc_id[1:])
        assert [ln for ln in text.split("\n") if ln.startswith(f"doc{d} ")] == [
            ln for ln in texts[d].split("\n") if ln.startswith("doc")
        ]
    stats = res.all_stats()
    assert stats["lines_removed"] == 27 * (n - 1)
    assert stats["repeated_lines"] == 27
    assert stats["line_bytes_removed"] == (n - 1) * sum(len(s.encode()) for s in SHARED)
    assert stats["docs_changed"] == n - 1
    assert stats["docs_in"] == stats["docs_out"] + stats[f"dropped_{REASON}"]
    assert stats["examples"][0]["docs"] == n and stats["examples"][0]["text"] in SHARED


def test_min_docs_and_repeats_inside_one_document(tmp_path):
    """'twice' is in 2 documents (< min_docs 3: kept in both); 'thrice' in 3 (kept in the first
    only); 'echo' twice in one document and once in another: 2 documents, kept everywhere."""
    rng = np.random.default_rng(1)
    body = [" ".join(sentence(rng) for _ in range(12)) for _ in range(4)]
    texts = [
        f"{body[0]}\ntwice\nthrice\necho\necho",
        f"{body[1]}\ntwice\nthrice",
        f"{body[2]}\nthrice\necho",
        body[3],
    ]
    res, out = _run(tmp_path, _parts(texts, 2), min_docs=3)
    kept = _kept(out)
    assert [t.count("twice") for t in kept.values()] == [1, 1, 0, 0]
    assert [t.count("echo") for t in kept.values()] == [2, 0, 1, 0]
    keys = lines.doc_keys(0, 3, SEED)
    first = int(np.argmin(keys))
    assert [t.count("thrice") for t in kept.values()] == [int(d == first) for d in range(4)]
    assert res.all_stats()["lines_removed"] == 2


def test_a_document_left_short_is_dropped_with_its_reason(tmp_path):
    rng = np.random.default_rng(2)
    texts = [_page(d, rng) for d in range(5)]
    texts.append("\n".join(NAV + ["just a few words here"] + FOOTER))  # boilerplate only
    res, out = _run(tmp_path, _parts(texts, 3))
    stats = res.all_stats()
    first = int(np.argmin(lines.doc_keys(0, 6, SEED)))
    assert first != 5 and stats[f"dropped_{REASON}"] == 1
    assert "d5" not in _kept(out)
    rejected = pq.read_table(out / "rejected" / part_name(1)).to_pylist()
    assert [(r["id"], r["reasons"], r["words_left"]) for r in rejected] == [("d5", [REASON], 5)]
    assert rejected[0]["text"] == texts[5]  # the original text, for inspection
    shown = inspect_rejected(tmp_path, "out", REASON, 5, 80)
    assert f"{REASON}=1" in shown and "d5" in shown and "units_removed=27" in shown


def test_paragraphs(tmp_path):
    rng = np.random.default_rng(3)
    shared = "Subscribe to our newsletter.\nIt arrives every week."
    texts = [
        "\n\n".join([" ".join(sentence(rng) for _ in range(12)), shared, f"doc {d} ends."])
        for d in range(4)
    ]
    _, out = _run(tmp_path, _parts(texts, 2), unit="paragraph")
    kept = list(_kept(out).values())
    first = int(np.argmin(lines.doc_keys(0, 4, SEED)))
    for d, t in enumerate(kept):
        assert (shared in t) == (d == first)
        assert t.endswith(f"doc {d} ends.") and "\n\n\n" not in t
        if d != first:
            assert t == texts[d].replace(shared + "\n\n", "")


@pytest.mark.parametrize("unit", lines.UNITS)
def test_same_bytes_for_any_worker_count_and_partitioning(tmp_path, monkeypatch, unit):
    """The small-input path (in memory, one partition: the driver numbers stripped lines, or
    paragraph hashes, with Arrow's hash table) and the partitioned path (hashes in work files,
    2^k partitions) give the same bytes and examples, with 1 or 2 workers."""
    rng = np.random.default_rng(4)
    texts = [_page(d, rng, body_lines=2) for d in range(24)]
    texts[3] = "\n".join(SHARED[:3])
    if unit == "paragraph":  # the shared lines as paragraphs, some padded with whitespace
        texts = [t.replace("\n", "\n\n" if d % 3 else " \n \n") for d, t in enumerate(texts)]
    parts = _parts(texts, 5)
    res1, one = _run(tmp_path, parts, workers=1, name="w1", unit=unit)
    workers = 2 if unit == "line" else 1  # a process pool costs ~1 s: once is enough
    _, small2 = _run(tmp_path, parts, workers=workers, name="s2", unit=unit)
    monkeypatch.setattr(line_dedup, "SMALL_TEXT_BYTES", 0)  # the partitioned path
    monkeypatch.setattr(line_dedup, "ROWS_PER_PARTITION", 64)  # 2^k hash partitions
    res, two = _run(tmp_path, parts, workers=workers, name="w2", unit=unit)
    assert res1.stats[f"{unit}s_removed"] > 0 and res1.stats["examples"][0]["text"] in SHARED
    assert res1.stats["hash_partitions"] == 1 and res.stats["hash_partitions"] > 4
    assert res.stats["examples"] == res1.stats["examples"]
    files = sorted(p.relative_to(one) for p in one.rglob("*.parquet"))
    assert any(f.parts[0] == "rejected" for f in files)
    for other in (small2, two):
        assert files == sorted(p.relative_to(other) for p in other.rglob("*.parquet"))
        for f in files:
            assert (one / f).read_bytes() == (other / f).read_bytes(), f


def test_split_and_join_round_trip():
    for text in ["", "a", "a\n\n b\n \n\nc\n", "\n\nx\n\n", "l1\nl2\r\nl3\n"]:
        for unit in lines.UNITS:
            assert lines.join_units(lines.split_units(text, unit), unit) == text
            h, _, counts = lines.unit_hashes(*lines.utf8_buffers([text]), unit, 0)
            assert (
                len(h)
                == counts.sum()
                == sum(bool(s.strip()) for s in lines._units(lines.split_units(text, unit), unit))
            )
            assert lines.remove_units(text, unit, [])[0] == text


def test_min_docs_below_two_is_a_recipe_error():
    from pipeline.config import build_config
    from pipeline.errors import RecipeError

    with pytest.raises(RecipeError, match="line_dedup.min_docs"):
        build_config(LineDedupConfig, {"min_docs": 1}, "line_dedup")


def test_empty_parts_and_texts(tmp_path):
    rng = np.random.default_rng(5)
    parts = _parts([_page(d, rng) for d in range(3)], 3)
    parts += [docs_table([], [], []), docs_table(["e0", "e1"], ["", "\n\n \n"], ["w", "w"])]
    res, out = _run(tmp_path, parts)
    stats = res.all_stats()
    assert stats["docs_in"] == stats["docs_out"] == 5 and stats["lines_removed"] == 27 * 2
    assert pq.read_table(out / part_name(1)).num_rows == 0
    assert pq.read_table(out / part_name(2)).column("text").to_pylist() == ["", "\n\n \n"]


def test_cut_units_is_remove_units_for_every_document_at_once():
    """The byte-level cut of the stage (every document of a part at once, from a buffer that
    need not start at 0) equals remove_units on each text, for random drops."""
    rng = np.random.default_rng(6)
    alphabet = ["a", "bc", " ", "\n", "\n\n", " \n", "é", "\u3000", "x y"]
    for _ in range(300):
        texts = ["".join(rng.choice(alphabet, rng.integers(0, 12))) for _ in range(4)]
        for unit in lines.UNITS:
            data, off = lines.utf8_buffers(["z\nq", *texts])
            off = off[1:]  # the buffer starts with another document's bytes
            start, end, per_doc = lines.unit_spans(data, off, unit)
            drop = rng.random(len(start)) < 0.5
            new, new_off, nbytes = lines.cut_units(data, off, start, end, per_doc, drop)
            first = np.cumsum(per_doc) - per_doc
            for d, text in enumerate(texts):
                gone = [k for k in range(per_doc[d]) if drop[first[d] + k]]
                want, want_bytes = lines.remove_units(text, unit, gone)
                assert new[new_off[d] : new_off[d + 1]].tobytes().decode() == want
                assert nbytes[d] == want_bytes


def test_arrow_lines_are_the_numpy_lines():
    """The line path's Arrow kernels give unit_hashes' keys, unit indices and counts and
    remove_units' texts, on sliced string and large_string columns; utf8_trim_whitespace
    strips exactly str.strip()'s characters, checked on every code point."""
    rng = np.random.default_rng(7)
    alphabet = ["a", "bc", " ", "\n", "\t", "\r\n", "é", "\u3000", "\xa0", "\x1c", "\u2028", "x y"]
    for _ in range(150):
        texts = ["".join(rng.choice(alphabet, rng.integers(0, 12))) for _ in range(4)]
        for kind in (pa.string(), pa.large_string()):
            col = pa.array(["z\nq", *texts], kind).slice(1)
            ls, stripped = lines.arrow_lines(col)
            for min_chars in (0, 2):
                got = lines.arrow_line_hashes(ls, stripped, min_chars)
                want = lines.unit_hashes(*lines.utf8_buffers(texts), "line", min_chars)
                for g, w in zip(got, want, strict=True):
                    assert np.array_equal(g, w)
            drop = rng.random(len(ls.flatten())) < 0.5
            new, nbytes = lines.arrow_cut_lines(ls, drop)
            first = np.cumsum([len(t.split("\n")) for t in texts]) - [
                len(t.split("\n")) for t in texts
            ]
            total = 0
            for d, text in enumerate(texts):
                gone = [k for k in range(len(text.split("\n"))) if drop[first[d] + k]]
                want_text, want_bytes = lines.remove_units(text, "line", gone)
                assert new[d].as_py() == want_text
                total += want_bytes
            assert new.type == kind and nbytes == total
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    chars = pa.array([chr(c) for c in points])
    blank = pc.binary_length(pc.utf8_trim_whitespace(chars)).to_numpy() == 0
    assert [c for c, b in zip(points, blank.tolist(), strict=True) if b != chr(c).isspace()] == []


def test_unit_removals_is_rows_repeated_and_removable():
    """The small input's one-pass count (dense ids, no sort) flags the units and finds the
    repeated keys that part_rows + repeated + removable (the partitioned path) do."""
    rng = np.random.default_rng(8)
    for _ in range(200):
        counts = rng.integers(0, 8, rng.integers(1, 30))
        hashes = rng.integers(0, 6, counts.sum()).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        keys = lines.doc_keys(0, len(counts), 3)
        doc = np.repeat(np.arange(len(counts)), counts)
        min_docs = int(rng.integers(2, 4))
        ids, distinct = lines.dense_ids(pa.array(hashes))
        drop, rep_ids, docs = lines.unit_removals(ids, len(distinct), keys[doc], doc, min_docs)
        rep, want_docs = lines.repeated(lines.part_rows(hashes, counts, keys), min_docs)
        assert np.array_equal(drop, lines.removable(hashes, keys[doc], rep))
        got = distinct.to_numpy()[rep_ids]
        order = np.argsort(got)
        assert np.array_equal(got[order], rep[0]) and np.array_equal(docs[order], want_docs)

"""The reference pipeline's (design doc 002) recipe key names: the top-level shorthand for the
download block works, every other name gets one line naming our key, its range and default."""

from __future__ import annotations

import pytest

from pipeline.errors import RecipeError
from pipeline.recipe import build_recipe, load_recipe
from pipeline.reference_keys import BY_NAME, SHORTHAND

BASE = {"download": {"source": "toy"}}

# every name doc 002 uses as a recipe key -> what our error must name (None: shorthand works)
CASES = [
    ("source", None),
    ("source_path", None),
    ("source_name", None),
    ("max_docs", None),
    ("do_nfkc", "`do_nfkc` is `clean.nfkc` here (true or false, default true)"),
    ("strip_html", "`strip_html` is `clean.strip_html` here (true or false, default true)"),
    ("redact_pii", "`redact_pii` is `clean.redact_pii` here (a list, default [url, email,"),
    ("min_chars", "`min_chars` is `clean.min_chars` here (≥ 0 or null, default null)"),
    (
        "min_alpha_ratio",
        "`min_alpha_ratio` is `clean.min_alpha_words_frac` here (0–1 or null, default 0.8)",
    ),
    (
        "max_ngram_dup_ratio",
        "`max_ngram_dup_ratio` is `clean.max_dup_5gram_chars_frac` here (0–1 or null, "
        "default 0.15)",
    ),
    ("dedup_threshold", "`dedup_threshold` is `dedup.threshold` here ((0, 1], default 0.8)"),
    ("num_perm", "`num_perm` is `dedup.num_perm` here (8–1024, default 128)"),
    ("rows_per_band", "`rows_per_band` is `dedup.rows` here (≥ 1 or null, default null)"),
    ("vocab", "`vocab` is `tokenize.vocab_size` here (257–4294967296, default 8192)"),
    ("seq_len", "`seq_len` is `pack.seq_len` here (2–1048576, default 2048)"),
    ("attn_window", "`attn_window` is no data-recipe key here: it is a model setting"),
    ("verbose", "`verbose` is no data-recipe key here: merged documents are printed by"),
    ("reject_reasons", "`reject_reasons` is no data-recipe key here: it is a report field"),
]


def test_the_table_covers_every_case():
    assert sorted(BY_NAME) == sorted(name for name, _ in CASES)


@pytest.mark.parametrize("name,message", [c for c in CASES if c[1]])
def test_reference_name_at_top_level_names_our_key(name, message):
    with pytest.raises(RecipeError) as err:
        build_recipe({**BASE, name: 1})
    text = str(err.value)
    assert text.startswith(f"{name}: {message}"), text
    assert "\n" not in text and "did you mean" not in text  # no misleading closest key


@pytest.mark.parametrize("name,message", [c for c in CASES if c[1]])
def test_reference_name_inside_a_block_names_our_key(name, message):
    ours = BY_NAME[name].ours or ""
    block = "dedup" if ours.startswith("clean.") else "clean"  # a block without the name
    with pytest.raises(RecipeError, match=f"^{block}.{name}: ") as err:
        build_recipe({**BASE, block: {name: 1}})
    assert message in str(err.value)


@pytest.mark.parametrize("name", sorted(SHORTHAND))
def test_shorthand_inside_a_stage_block_names_our_key(name):
    want = f"`{name}` is `download.{SHORTHAND[name]}` here"
    with pytest.raises(RecipeError, match=f"^clean.{name}: {want}"):
        build_recipe({**BASE, "clean": {name: "x"}})
    if name in ("source_path", "source_name"):  # not our download keys: named there too
        with pytest.raises(RecipeError, match=f"^download.{name}: {want}"):
            build_recipe({"download": {"source": "toy", name: "x"}})


def test_top_level_source_and_source_path_are_the_download_block(tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text('{"id": "a", "text": "hello"}\n')
    short = build_recipe({"source": "jsonl", "source_path": str(data), "max_docs": 5})
    full = build_recipe({"download": {"source": "jsonl", "path": str(data), "max_docs": 5}})
    assert short == full
    named = build_recipe({"source_name": "toy", "max_docs": 7, "download": {"docs_per_part": 3}})
    assert (named.stages["download"].source, named.stages["download"].max_docs) == ("toy", 7)
    assert named.stages["download"].docs_per_part == 3


def test_shorthand_never_means_two_things(tmp_path):
    with pytest.raises(RecipeError, match="^source: is a shorthand for download.source, which"):
        build_recipe({"source": "jsonl", "download": {"source": "toy"}})
    with pytest.raises(RecipeError, match="^source_name: sets download.source, as `source`"):
        build_recipe({"source": "toy", "source_name": "tinystories"})
    with pytest.raises(RecipeError, match="^source_path: needs `source: jsonl`"):
        build_recipe({"source_path": "x.jsonl"})
    with pytest.raises(RecipeError, match="^download: is false, but source set its keys"):
        build_recipe({"source": "toy", "download": False})


def test_set_overrides_win_over_the_shorthand(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("source: toy\nmax_docs: 5\n")
    got = load_recipe(recipe, ["download.max_docs=9"])
    assert got.stages["download"].max_docs == 9


def test_a_stage_field_at_top_level_names_its_block():
    with pytest.raises(RecipeError, match=r"^vocab_size: `vocab_size` is `tokenize.vocab_size`"):
        build_recipe({**BASE, "vocab_size": 4096})
    with pytest.raises(RecipeError, match=r"put it in the `dedup:` block$"):
        build_recipe({**BASE, "threshold": 0.7})

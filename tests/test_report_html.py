"""report.html: well-formed, self-contained (no network reference), one chart per section,
thresholds labelled with their recipe keys, the full recipe at the end; recipe keys in the json
and the table; the SVG helpers' geometry on worked examples."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import yaml

from pipeline.cli import main
from pipeline.config import RunConfig
from pipeline.recipe import load_recipe
from pipeline.report import format_report, load_report
from pipeline.report.html import HTML_NAME, render_html, section_ids
from pipeline.stages import STAGES

# anything that would make a browser fetch or run something
NETWORK = re.compile(r"https?:|ftp:|//[a-z0-9]|url\(|@import|<script|<link|<img|<iframe", re.I)


def parse(html: str) -> ET.Element:
    return ET.fromstring(html)  # raises on unbalanced tags or bad escapes


def section(root: ET.Element, ident: str) -> ET.Element:
    found = [s for s in root.iter("section") if s.get("id") == ident]
    assert len(found) == 1, ident
    return found[0]


def text_of(el: ET.Element) -> str:
    return "".join(el.itertext())


def test_every_run_writes_a_self_contained_well_formed_page(report_runs):
    html = (report_runs["a"] / HTML_NAME).read_text(encoding="utf-8")
    root = parse(html)
    assert not NETWORK.findall(html)
    assert all(a.get("href", "#").startswith("#") for a in root.iter("a"))
    assert not [el for el in root.iter() if el.get("src") is not None]
    report = load_report(report_runs["a"])
    assert html == render_html(report)  # the file is the report's rendering, nothing else


def test_one_chart_per_section_and_the_charts_the_issue_lists(report_runs):
    report = load_report(report_runs["a"])
    root = parse(render_html(report))
    stages = [s["stage"] for s in report["stages"]]
    assert stages == list(STAGES)  # the toy recipe enables every stage
    for ident in section_ids(report):
        svgs = list(section(root, ident).iter("svg"))
        assert svgs, f"section {ident} has no chart"
        assert all(s.find("title") is not None for s in svgs)
    titles = [s.find("title").text for s in root.iter("svg")]
    for want in (
        "documents after each stage",
        "documents dropped by stage and reason",
        "clean: documents failing each rule",
        "gopher_min_words_v1: num_words",
        "dedup: near-duplicate cluster sizes",
        "dedup: LSH S-curve",
        "quality: mean score",
        "tokenize: document length in tokens",
        "pack: sequences by fill",
        "shard: train shard sizes",
        "stage time",
    ):
        assert any(t.startswith(want) for t in titles), want
    # the numbers behind each chart: every figure holds a table
    assert all(fig.find(".//table") is not None for fig in root.iter("figure"))
    shard = text_of(section(root, "stage-shard"))
    assert "shuffle of the train order" in shard and "shuffle_spearman" in shard


def test_thresholds_are_labelled_with_their_recipe_keys(report_runs):
    root = parse((report_runs["b"] / HTML_NAME).read_text(encoding="utf-8"))
    clean = text_of(section(root, "stage-clean"))
    assert "clean.min_words = 120" in clean  # the moved value, on its histogram's line
    assert "clean.max_dup_5gram_chars_frac = 0.15" in clean
    assert "quality.min_score = 0.6" in text_of(section(root, "stage-quality"))
    assert "dedup.threshold = 0.8" in text_of(section(root, "stage-dedup"))
    assert "pack.seq_len = 512" in text_of(section(root, "stage-tokenize"))


def test_page_ends_with_the_recipe_every_default_filled_in(report_runs):
    from helpers import TOY_RECIPE

    root = parse((report_runs["b"] / HTML_NAME).read_text(encoding="utf-8"))
    shown = yaml.safe_load(section(root, "recipe").find("pre").text)
    overrides = ["clean.min_words=120", "quality.min_score=0.6", "tokenize.vocab_size=1024"]
    overrides += ["download.max_docs=400"]
    want = load_recipe(TOY_RECIPE, overrides).to_dict()
    del want["out_dir"], want["workers"], want["executor"]  # never change outputs: not recorded
    assert shown == want
    assert shown["clean"]["max_words"] == 100_000  # a default the recipe file never names


def test_report_json_names_the_recipe_key_of_every_setting(report_runs):
    report = load_report(report_runs["b"])
    stats = {s["stage"]: s["stats"] for s in report["stages"]}
    keys = {
        (stage, k): v for stage, st in stats.items() for k, v in st.items() if k.endswith("_key")
    }
    assert len(keys) >= 15
    for (stage, stat), key in keys.items():
        assert stat.removesuffix("_key") in stats[stage]  # a key sits beside its value
        section_name, _, field = key.rpartition(".")
        cls = STAGES[section_name].config_cls if section_name else RunConfig
        assert field in {f.name for f in dataclasses.fields(cls)}, key
    assert stats["quality"]["threshold"] == 0.6
    assert stats["quality"]["threshold_key"] == "quality.min_score"
    assert stats["pack"]["seq_len_key"] == "pack.seq_len"
    assert stats["dedup"]["threshold_key"] == "dedup.threshold"
    assert stats["shard"]["subsample_seed_key"] == "seed"
    rule = stats["clean"]["rules"]["gopher_min_words_v1"]
    assert (rule["threshold"], rule["key"]) == (120, "clean.min_words")
    assert stats["clean"]["histograms"]["gopher_min_words_v1"]["key"] == "clean.min_words"
    table = format_report(report)
    assert re.search(r"threshold\s+0\.600\s+\(quality\.min_score\)", table)
    assert "threshold=120.000 (clean.min_words)" in table
    assert re.search(r"seq_len\s+512\s+\(pack\.seq_len\)", table)


def test_report_html_command_rewrites_the_same_page(report_runs, capsys):
    path = report_runs["a"] / HTML_NAME
    before = path.read_bytes()
    path.unlink()
    assert main(["report", str(report_runs["a"]), "--html"]) == 0
    assert capsys.readouterr().out.strip() == str(path)
    assert path.read_bytes() == before


def test_a_report_with_unknown_or_partial_stages_still_renders():
    report = {
        "recipe": {"name": "x"},
        "seed": 1,
        "stages": [
            {"stage": "clean", "seconds": 0.1, "stats": {"docs_in": 3, "docs_out": 3}},
            {"stage": "mystery", "seconds": 0.2, "stats": {"widgets": 4, "ratio": 0.5}},
        ],
    }
    root = parse(render_html(report))
    for ident in section_ids(report):
        assert list(section(root, ident).iter("svg")), ident

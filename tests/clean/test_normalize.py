"""clean.normalize: the worked example, switches, C4 boilerplate lines, surrogates and NUL."""

from __future__ import annotations

from pipeline.clean.normalize import NormalizeOptions, normalize_text

ALL_ON = NormalizeOptions()


def test_normalize_worked_example():
    """NFKC maps the ligature and full-width letters, HTML goes, entities unescape, NUL and
    other controls vanish, space runs fold, the paragraph break survives as one blank line."""
    raw = (
        "<p>The \ufb01rst &amp; \uff21\uff22\uff23</p>\x00\r\n<div>tab\there  "
        "<b>bold</b></div>\n\n\n\nnext\u200b para\x07"
    )
    text, counts = normalize_text(raw, ALL_ON)
    assert text == "The first & ABC\n\ntab here bold\n\nnext\u200b para"
    assert counts[:3] == [1, 1, 1]


def test_normalize_switches_off_and_keeps_non_html():
    off = NormalizeOptions(False, False, False, False, False)
    raw = "<p>x</p>  \ufb01"
    assert normalize_text(raw, off)[0] == raw
    # angle brackets that are not known tags are prose or code, not HTML
    text, _ = normalize_text("if a < b and c > d then <T> wins", ALL_ON)
    assert text == "if a < b and c > d then <T> wins"


def test_boilerplate_lines_removed_c4():
    raw = "Good line one here.\nThis site uses cookies, see our Cookie Policy.\nEnable JavaScript."
    text, counts = normalize_text(raw, ALL_ON)
    assert text == "Good line one here."
    assert counts[3] == 2


def test_lone_surrogates_and_nul_removed():
    text, counts = normalize_text("ok\ud800 text\x00 here\udfff", ALL_ON)
    assert text == "ok text here"
    assert counts[0] == 1
    text.encode("utf-8")  # writable

"""clean's v2 rules on the shapes real text comes in (issue 23): hard-wrapped paragraphs,
tokenised punctuation, unspaced scripts, one-paragraph texts, play dialogue; and the junk
those shapes must not let through."""

from __future__ import annotations

import textwrap

import numpy as np

from pipeline.clean.rules import RULE_NAMES
from pipeline.clean.textstats import STAT_INDEX, filter_stats, logical_lines
from pipeline.stages.clean import CleanConfig, clean_texts

SENTENCES = [
    "The harbour board said on Tuesday that grain shipments rose in the first quarter",
    "Officials expect the new terminal to open later this year after a long delay",
    "Farmers in the region have asked for lower fees and better rail connections",
    "The company said its board approved a plan to expand the northern warehouse",
    "Analysts said the figures were in line with what the market had expected",
    "Exports of wheat and barley were higher than in the same period last year",
]


def prose(n: int = 6) -> str:
    return " ".join(f"{SENTENCES[i % len(SENTENCES)]}." for i in range(n))


def reasons(text: str, cfg: CleanConfig | None = None) -> list[str]:
    batch = clean_texts([text], cfg or CleanConfig())
    return [RULE_NAMES[j] for j in np.flatnonzero(batch.fails[0])]


def stat(text: str, name: str) -> float:
    return float(filter_stats(text)[STAT_INDEX[name]])


def test_hard_wrapped_paragraphs_are_judged_as_paragraphs():
    one_line = prose(6)
    wrapped = "\n".join(textwrap.wrap(one_line, 62))
    assert wrapped.count("\n") >= 6
    logical, joins = logical_lines(wrapped)
    assert logical == [one_line] and joins == wrapped.count("\n")
    assert reasons(wrapped) == [] == reasons(one_line)
    for name in ("line_punct_frac", "c4_sentences", "short_lines_frac"):
        assert stat(wrapped, name) == stat(one_line, name)
    # two wrapped paragraphs stay two; a short table row stays a line of its own
    two = wrapped + "\n\n" + "\n".join(textwrap.wrap(prose(4), 62)) + "\nNet 1,545 vs 2,188"
    assert len(logical_lines(two)[0]) == 3


def test_menus_and_lists_are_not_unwrapped():
    menu = "\n".join(["Home", "About us", "Products and services", "Contact", "Login"] * 6)
    assert logical_lines(menu) == ([ln for ln in menu.split("\n")], 0)
    assert "fineweb_short_lines_v2" in reasons(menu)
    # lines that each end a sentence are not wrapped, whatever their width
    lines = "\n".join(f"{s}." for s in SENTENCES)
    assert logical_lines(lines)[1] == 0


def test_symbols_exclude_whitespace_and_tokenised_punctuation_is_no_word():
    story = "Tom and Sam ran to the big red barn . Then they sat in the sun and had a nap . " * 8
    assert stat(story, "non_alnum_chars_frac") < 0.1  # spaces were 20 % of v1's share
    wiki = (
        " The 1 @,@ 200 @-@ year @-@ old castle , built in the north of the valley , was "
        "restored in 1998 ( after a fire ) and is now a museum . " * 6
    )
    assert stat(wiki, "alpha_words_frac") > 0.85
    assert not {"symbol_chars_v2", "gopher_alpha_words_v2"} & set(reasons(wiki))
    # symbols as words still count: a page of = | $ tokens fails both
    junk = "= | $ + = | $ + " * 30 + prose(3)
    assert {"symbol_chars_v2", "gopher_alpha_words_v2"} <= set(reasons(junk))


def test_one_paragraph_chinese_text_needs_no_final_mark():
    review = (
        "酒店位置很好,离地铁站只有五分钟,房间干净整洁,服务员态度也很热情,早餐品种比较丰富,"
        "唯一的缺点是隔音一般,晚上能听到走廊的声音,总体来说性价比很高,下次还会再来"
    )
    assert stat(review, "line_punct_frac") == 1.0
    assert stat(review, "c4_sentences") >= 3  # clause commas end sentences in unspaced text
    assert reasons(review) == []
    # two paragraphs without end marks are not one paragraph: the line rules apply
    menu = "首页 新闻 图片 视频 音乐 地图\n" * 10
    assert stat(menu, "line_punct_frac") == 0.0


def test_ngram_rules_read_2n_characters_in_unspaced_scripts():
    name = "中华人民共和国"  # a 7-character name repeated in a passage is not a repeated 5-gram
    text = "".join(
        f"{name}{s}。"
        for s in (
            "成立于一九四九年",
            "位于亚洲东部",
            "人口众多历史悠久",
            "首都是北京",
            "有很多民族",
        )
    )
    assert stat(text, "dup_5gram_chars_frac") == 0.0
    spam = "没有送水没有送水没有送水" * 12
    assert "gopher_top_2gram_v2" in reasons(spam)


def test_digits_weighted_in_unspaced_scripts():
    zh = "他于1950年5月30日出生,1981年至2012年任国民议会议员,2010年至2011年任副议长。"
    en = (
        "He was born on 30 May 1950, served in the National Assembly from 1981 to 2012 and was "
        "its vice-president from 2010 to 2011."
    )
    zh_frac, en_frac = stat(zh, "digit_chars_frac"), stat(en, "digit_chars_frac")
    assert 0.67 * en_frac < zh_frac < 1.5 * en_frac  # the same facts, about the same share
    assert zh_frac < 0.5 * sum(c.isdigit() for c in zh) / len(zh)  # v1's share: 2.6x English
    assert "digit_chars_v2" in reasons("1234 5678 9012 3456 " * 40)


def test_play_dialogue_labels_join_their_speech():
    page = "\n\n".join(
        f"{who}:\n{line}"
        for who, line in [
            ("ROMEO", "But soft, what light through yonder window breaks?"),
            ("JULIET", "Ay me!"),
            ("ROMEO", "She speaks, O speak again, bright angel."),
            ("JULIET", "O Romeo, Romeo, wherefore art thou Romeo?"),
            ("ROMEO", "Shall I hear more, or shall I speak at this?"),
            ("JULIET", "Tis but thy name that is my enemy."),
        ]
        * 3
    )
    logical, _ = logical_lines(page)
    assert logical[0] == "ROMEO: But soft, what light through yonder window breaks?"
    assert stat(page, "short_lines_frac") < 0.67


def test_last_line_may_trail_off_but_teaser_lists_fail():
    assert stat(prose(4) + "\nand then...", "ellipsis_lines_frac") == 0.0
    teasers = "\n".join(f"{s} and then..." for s in SENTENCES * 2)
    assert "gopher_ellipsis_lines_v2" in reasons(teasers)


def test_wiki_language_conversion_is_not_code():
    text = "他是-{zh-cn:尤塞恩·博尔特;zh-tw:尤塞恩·柏特}-,牙买加短跑运动员,多次打破世界纪录。" * 3
    assert stat(text, "c4_curly_bracket") == 0.0
    code = prose(3) + "\nIn C you write int main() { return 0; } to finish."
    assert stat(code, "c4_curly_bracket") == 1.0

"""clean.textstats: statistics against reference ports, scripts, bad input, long documents."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.clean.charclass import SCRIPTS
from pipeline.clean.rules import RULE_NAMES
from pipeline.clean.textstats import STAT_INDEX, filter_stats
from pipeline.stages.clean import CleanConfig, clean_texts


def stat(text: str, name: str) -> float:
    return float(filter_stats(text)[STAT_INDEX[name]])


def _ref_dup_ngram_chars(words: list[str], n: int) -> int:
    """datatrove's find_all_duplicate, verbatim logic."""
    unique: set[str] = set()
    repeated, idx = 0, 0
    while idx < len(words) - n + 1:
        gram = "".join(words[idx : idx + n])
        if gram in unique:
            repeated += len(gram)
            idx += n
        else:
            unique.add(gram)
            idx += 1
    return repeated


def _ref_top_ngram_chars(words: list[str], n: int) -> int:
    grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0
    top, count = Counter(grams).most_common(1)[0]
    return len(top) * count


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "dd"]), min_size=0, max_size=60))
def test_ngram_stats_match_datatrove_reference(words):
    """Single-letter-ish words make datatrove's "".join unambiguous, so counts must be equal."""
    text = " ".join(words)
    if not text:
        return
    out = filter_stats(text)
    for n in (2, 3, 4):
        got = out[STAT_INDEX[f"top_{n}gram_chars_frac"]]
        assert math.isclose(got, _ref_top_ngram_chars(words, n) / len(text))
    for n in range(5, 11):
        got = out[STAT_INDEX[f"dup_{n}gram_chars_frac"]]
        assert math.isclose(got, _ref_dup_ngram_chars(words, n) / len(text)), n


def test_filter_stats_worked_example():
    """3 lines, 2 identical: dup_lines = 1/3, dup line chars = 10/32 ("same line." has 10 chars,
    text has 10+1+10+1+10 = 32). Words: same line. same line. the #tag x = 7; '#' once -> 1/7.
    Mean word length leaves punctuation out: (4+4+4+4+3+3+1)/7 = 23/7. Stop words: 'the' only."""
    text = "same line.\nsame line.\nthe #tag x"
    out = filter_stats(text)
    assert out[STAT_INDEX["num_chars"]] == 32
    assert out[STAT_INDEX["num_words"]] == 7
    assert math.isclose(out[STAT_INDEX["dup_lines_frac"]], 1 / 3)
    assert math.isclose(out[STAT_INDEX["dup_line_chars_frac"]], 10 / 32)
    assert math.isclose(out[STAT_INDEX["hash_ratio"]], 1 / 7)
    assert math.isclose(out[STAT_INDEX["mean_word_length"]], 23 / 7)
    assert out[STAT_INDEX["stop_words"]] == 1


ZH = [
    "今天早上我们一起去公园散步，看到很多老人在打太极拳。",
    "这家饭店的菜很好吃，价格也比较合理，服务员态度非常热情。",
    "图书馆里安静极了，学生们都在认真地复习功课。",
    "下午突然下起了大雨，街上的行人纷纷躲进商店避雨。",
    "我的朋友刚从北京回来，给我带了一些当地的特产。",
    "这部电影讲述了一个普通家庭在困难时期互相扶持的故事。",
    "春天来了，山上的花都开了，空气里满是清新的味道。",
    "老师提醒大家明天要带好课本和作业，按时到学校上课。",
    "他每天坚持跑步半个小时，身体比以前健康多了。",
    "周末我们打算去海边度假，顺便看看日出和日落。",
]


RU = [
    "Утром мы вышли из дома и пошли к реке, что текла за старым садом.",
    "Он долго смотрел на небо и думал о том, как быстро прошло лето.",
    "В деревне не было ни одного магазина, поэтому хлеб пекли сами.",
    "Учитель рассказал детям историю о море и о далёких островах.",
    "Вечером на площади играла музыка, и люди танцевали до ночи.",
    "С тех пор она каждый год приезжала в этот тихий городок.",
    "Мы не знали, что поезд уходит так рано, и чуть не опоздали.",
    "Старый мастер показал, как делать лодки из светлого дерева.",
]


def _paragraphs(pool: list[str], rng: np.random.Generator, joiner: str) -> str:
    order = rng.permutation(len(pool))
    return "\n\n".join(joiner.join(pool[i] for i in order[k : k + 3]) for k in (0, 3, 6))


def test_chinese_and_russian_documents_are_kept():
    """Word rules are script-aware: each Han char is a word, stop words use a per-script list
    (Russian) or do not apply (Chinese), mean word length is skipped for Chinese."""
    rng = np.random.default_rng(0)
    zh = [_paragraphs(ZH, rng, "") for _ in range(20)]
    ru = [_paragraphs(RU, rng, " ") for _ in range(20)]
    batch = clean_texts(zh + ru, CleanConfig())
    failing = [RULE_NAMES[j] for j in np.flatnonzero(batch.fails.any(axis=0))]
    assert batch.keep.all(), failing
    scripts = [SCRIPTS[int(filter_stats(t)[STAT_INDEX["dominant_script"]])] for t in (zh[0], ru[0])]
    assert scripts == ["cjk", "cyrillic"]
    out = filter_stats(zh[0])
    assert math.isnan(out[STAT_INDEX["stop_words"]])
    assert math.isnan(out[STAT_INDEX["mean_word_length"]])
    assert out[STAT_INDEX["num_words"]] > 100  # ~1 word per Han character, not 3 "words"
    assert filter_stats(ru[0])[STAT_INDEX["stop_words"]] >= 2


def test_script_consistency_drops_mixed_garble():
    rng = np.random.default_rng(1)
    mixed = _paragraphs(RU, rng, " ").replace("а", "a").replace("о", "o").replace("е", "e")
    batch = clean_texts([mixed], CleanConfig())
    assert batch.fails[0, RULE_NAMES.index("script_consistency_v1")]


def test_bad_input_is_counted_never_crashes():
    texts = ["", "   \n\t  ", None, "\x00\x00\x00", "a\ud800b " * 5, "word " * 30]
    batch = clean_texts(texts, CleanConfig())
    assert not batch.keep.any()
    empty = RULE_NAMES.index("empty_doc_v1")
    assert batch.fails[:4, empty].all()
    assert not batch.fails[4:, empty].any()
    assert "\ud800" not in batch.texts[4]


def test_too_long_document_gets_cheap_stats_only():
    text = "lorem ipsum " * 100  # 1200 chars
    out = filter_stats(text, max_chars=1000)
    assert out[STAT_INDEX["num_chars"]] == 1200
    assert math.isnan(out[STAT_INDEX["num_words"]])
    cfg = CleanConfig(max_chars=1000)
    batch = clean_texts([text], cfg)
    reasons = {RULE_NAMES[j] for j in np.flatnonzero(batch.fails[0])}
    assert "max_chars_v1" in reasons and "c4_lorem_ipsum_v2" not in reasons


def test_chinese_page_quoting_english_terms_stays_cjk():
    """By letters, 'Prometheus Federation Server' (26 letters) outweighs ~20 Han characters; by
    words it is 3 words against ~60, so the page stays CJK and no English rule applies."""
    rng = np.random.default_rng(2)
    text = "了解 Prometheus Federation 功能\n\n" + _paragraphs(ZH, rng, "") + " 使用 Server 部署。"
    out = filter_stats(text)
    assert SCRIPTS[int(out[STAT_INDEX["dominant_script"]])] == "cjk"
    assert math.isnan(out[STAT_INDEX["stop_words"]])
    assert clean_texts([text], CleanConfig()).keep.all()

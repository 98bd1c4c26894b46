"""The batch statistics (textstats.filter_stats_batch) equal the per-document reference
(tests/reference_textstats.py: the straightforward code they replaced) number for number, and the
shortcuts they rest on hold: the sentence-end flags count what the regexes count, lower-casing
per character is exact for the stop words, and PII's digit check never skips a match."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_textstats as ref
from pipeline.clean import charclass, lines, normalize, pii, textstats, words
from pipeline.clean.segment import segment

EDGE = [
    "",
    " ",
    "\n\n",
    "a",
    "word " * 60,
    "The cat sat on the mat. " * 30,
    "ROMEO:\nBut soft, what light through yonder window breaks?\n\nJULIET:\nAy me!\n" * 5,
    ("This line was wrapped at a fixed width by a mail program of old and\n" * 12),
    "- item one\n- item two\n- item three...\n" * 20,
    "中文的句子，很长的句子没有空格。还有一句话！" * 10,
    "И в не на что с он как. Это русский текст, и он длинный. " * 12,
    "Mixed Утрoм текст with the latin and cyrillic, that is it. " * 10,
    "lorem ipsum dolor sit amet. {curly} and javascript here. " * 10,
    "Ends with dots...\n\nA paragraph.\n\nA paragraph.\n\nA paragraph." * 4,
    "(the) [and] «with» “that” -have- be, to; of! " * 15,
    "Version 1.2.3.4 at 10.0.0.1 call +1 (555) 201-1234 or 555-201-1234. " * 8,
    "x" * 1500 + " tail words here. " * 40,
    "1950年5月30日，他说：“好。”然后走了。" * 12,
    "🙂 emoji 𠀀 astral 𝔘 text. " * 30,
    "The\u0130 \u212a kelvin THE AND \u0130the. " * 20,
    # hard-wrapped: two paragraphs join to the same line from different raw lines
    "This line was wrapped at a fixed width by a mail program of\nold and it goes on.\n\n"
    "This line was wrapped at a fixed width by a mail program\nof old and it goes on.",
]


# the reference's statistics, by name (a column added since, e.g. one another module fills in
# clean_texts, is not the batch path's to compute: it must stay NaN there)
_COLS = [textstats.STAT_INDEX[name] for name in textstats.FILTER_STAT_NAMES]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    a = got[:, _COLS]
    other = np.delete(got, _COLS, axis=1)
    return bool(((a == want) | (np.isnan(a) & np.isnan(want))).all() and np.isnan(other).all())


def test_batch_equals_reference_on_edge_cases():
    """Every statistic of every edge case, in one batch (so documents share the arrays) and
    with max_chars cutting the long one, equals the per-document reference exactly."""
    for max_chars in (None, 1000):
        got = textstats.filter_stats_batch(EDGE, max_chars, (5, 1000))
        want = np.array([ref.filter_stats(t, max_chars, (5, 1000)) for t in EDGE])
        assert _same(got, want)


_ALPHABET = "ab Z.!?。，,;\"')\n\n-•…1中и{:#"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(_ALPHABET, max_size=120), min_size=1, max_size=6))
def test_batch_equals_reference_on_random_text(texts):
    got = textstats.filter_stats_batch(texts, None, (2, 8))
    want = np.array([ref.filter_stats(t, None, (2, 8)) for t in texts])
    assert _same(got, want)


@settings(max_examples=200, deadline=None)
@given(st.text(".!?。！？\"')]」 ab1,;，；\n", max_size=60))
def test_sentence_flags_count_what_the_regexes_count(text):
    for line in text.split("\n"):
        line = line.strip()
        s = segment([line])
        p, a, b = lines._sentence_marks(s.cp, s.cls, lines._FLAGS[s.cp])
        assert int(a.sum()) == len(textstats._SENT_END_RE.findall(line))
        assert int(b.sum()) == len(textstats._SENT_END_UNSPACED_RE.findall(line))


def test_lower_case_table_is_exact_for_stop_words():
    """The facts words.py relies on, over every code point."""
    stop_letters = {c for ws in textstats.GOPHER_STOP_WORDS.values() for w in ws for c in w}
    strip = set(textstats._STRIP)
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        low = c.lower()
        assert len(low) == 1 or cp == 0x130
        assert (c in strip) == any(ch in strip for ch in low)
        if low in stop_letters and c != low:
            assert c.isascii() or 0x400 <= cp < 0x530, hex(cp)
    table = words._lower_table()
    assert table[ord("A")] == ord("a") and table[0x130] == words._NO_MATCH
    # words.py picks the tokens strip() may shorten by their end characters' class
    assert all(charclass._TABLE[ord(c)] == charclass.PUNCT for c in strip)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text("0123456789 .-()+:x", max_size=40), min_size=1, max_size=5))
def test_digit_hints_never_skip_a_match(texts):
    hints = pii.digit_hints(texts)
    for t, (may_ipv4, may_phone) in zip(texts, hints, strict=True):
        full = pii.redact(t, ("ip", "phone"))
        assert pii.redact(t, ("ip", "phone"), None, True, bool(may_ipv4), bool(may_phone)) == full


_HSPACE_RE = re.compile(r"[^\S\n]{2,}|[^\S\n ]")  # fold_whitespace's regexes before issue 27


def _fold_reference(text: str) -> str:
    if "  " in text or "\t" in text or (not text.isascii() and re.search(r"[^\S\n ]", text)):
        text = _HSPACE_RE.sub(" ", text)
    if " \n" in text or "\n " in text:
        text = re.sub(r" \n ?|\n ", "\n", text)
    if "\n\n\n" in text:
        text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


@settings(max_examples=300, deadline=None)
@given(st.text(" \t\n\x0b\r\xa0\u2028\u3000ab", max_size=40))
def test_fold_whitespace_equals_the_regexes(text):
    assert normalize.fold_whitespace(text) == _fold_reference(text)


def _redact_reference(text: str) -> tuple[str, dict[str, int]]:
    """pii.redact with every pattern run (no pre-check), as before issue 27."""
    counts = {}
    text, counts["url"] = pii._sub(pii._URL_RE, text, "url", None)
    text, counts["email"] = pii._sub(pii._EMAIL_RE, text, "email", None)
    text, n1 = pii._sub(pii._KEY_RE, text, "key", None)
    text, n2 = pii._sub(pii._LONG_KEY_RE, text, "key", lambda m: pii._is_long_key(m.group(0)))
    counts["key"] = n1 + n2
    text, n6 = pii._sub(pii._IPV6_RE, text, "ip", lambda m: pii._is_ipv6(m.group(0)))
    text, n4 = pii._sub(pii._IPV4_RE, text, "ip", pii._is_ipv4)
    counts["ip"] = n6 + n4
    text, counts["phone"] = pii._sub(
        pii._PHONE_RE, text, "phone", lambda m: pii._is_phone(m.group(0))
    )
    return text, counts


_PII_PIECES = st.sampled_from(
    [
        " ",
        "\n",
        "a",
        "Z",
        "7",
        "0",
        ".",
        ":",
        "::",
        "-",
        "@",
        "x.com",
        "http://a.b/",
        "www.",
        "fe80",
        "192.168",
        "+1 ",
        "(555)",
        "555-201-1234",
        "sk-",
        "AKIA",
        "eyJ",
        "aB3" * 11,
        "f" * 33,
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PII_PIECES, max_size=25))
def test_redact_prechecks_change_nothing(pieces):
    text = "".join(pieces)
    longest = max((len(w) for w in text.split()), default=0)
    digits = any(c.isdigit() for c in text)
    may4, may_ph = pii.digit_hints([text])[0]
    got = pii.redact(text, pii.PII_KINDS, longest, digits, bool(may4), bool(may_ph))
    assert got == _redact_reference(text)


@settings(max_examples=300, deadline=None)
@given(st.text("a \n\x00\x0b\x7f\x85\x9f\ufeff\ufffe\uffff\u00e9\u4e2d", max_size=20))
def test_control_check_is_exact(text):
    assert normalize._may_have_control(text) == bool(normalize._CONTROL_RE.search(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*pii._KEY_HINTS, "k", "_", "-", "gh", "A", "I", "x", " "])))
def test_key_check_never_skips_a_hint(pieces):
    text = "".join(pieces)
    if any(h in text for h in pii._KEY_HINTS):
        assert pii.may_have_key(text)
    if not pii.may_have_key(text):
        assert not pii._KEY_RE.search(text)


def test_nfkc_leaves_only_these_odd_spaces():
    """fold_whitespace(nfkc_clean=True) looks for NFKC_ODD_SPACES and "\\t" only: every other
    whitespace character is a control or decomposes (NFKC) to characters that are none."""
    chars = map(chr, range(0x110000))
    odd = {c for c in chars if c.isspace() and c not in " \n"}
    assert all(re.fullmatch(r"[^\S\n ]", c) for c in odd)
    survive = {
        c
        for c in odd
        if not normalize._CONTROL_RE.match(c) and c != "\r" and not unicodedata.decomposition(c)
    }
    assert survive == {"\t", *normalize.NFKC_ODD_SPACES}
    made = set()
    for c in map(chr, range(0x110000)):
        if unicodedata.decomposition(c):
            made.update(x for x in unicodedata.normalize("NFKC", c) if x in odd)
    assert not made


def test_boilerplate_check_lowers_only_what_it_must():
    """Non-ASCII characters whose lower case holds ASCII: İ ("i" + U+0307) and the Kelvin sign."""
    low_ascii = [c for c in range(128, 0x110000) if any(ord(x) < 128 for x in chr(c).lower())]
    assert low_ascii == [0x130, 0x212A]


_NORM_PIECES = st.sampled_from(
    ["\n", " ", "a", "e\u0301", "\u0301", "\u0323", "\u1100", "\u1161", "\u11a8", "\uff21",
     "\ufb01", "\u00a0", "\u2003", "\u3000", "\u1680", "\u2028", "\t", "  ", "\u0130", "\u212a",
     "COOKIE", "Java", "Script", "terms of", " use", "Privacy Policy", "\u4e2d", "\x0b"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_NORM_PIECES, max_size=20))
def test_line_by_line_nfkc_and_its_checks_equal_the_whole_text_ones(pieces):
    text = "".join(pieces)
    assert normalize.nfkc(text) == unicodedata.normalize("NFKC", text)
    assert normalize._may_have_boilerplate_text(text) == normalize.may_have_boilerplate(
        text.lower()
    )
    clean = unicodedata.normalize("NFKC", normalize._CONTROL_RE.sub("", text))
    assert normalize.fold_whitespace(clean, True) == normalize.fold_whitespace(clean)


_WRAP_LINES = st.sampled_from(
    ["This line was wrapped at a fixed width by a mail program of", "old and it goes on",
     "and on without an end mark until the paragraph is done here.", "", "", "- a bullet",
     "ROMEO:", "Q:", "The same line is here again, wrapped at the width too and", "short.",
     "中文的句子，很长的句子没有空格还有一句话，很长的句子没有空格还有一句话，很长的", "x" * 12,
     "It trails off at the end of the line, as wrapped lines can do...", "  indented line"
     " that goes on past the wrap width without a stop", "A sentence! Another one? Yes"]
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_WRAP_LINES, min_size=1, max_size=14), min_size=1, max_size=4))
def test_batch_equals_reference_on_wrapped_and_labelled_text(docs):
    """Hard-wrapped texts and label lines: the batch path joins their logical lines itself."""
    texts = ["\n".join(lines) for lines in docs]
    got = textstats.filter_stats_batch(texts, None, (5, 30))
    want = np.array([ref.filter_stats(t, None, (5, 30)) for t in texts])
    assert _same(got, want)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["Lorem IPSUM", "lorem", " ipsum", "COOKIE", "{", "\u0130", "\u212a",
                             "中", "Java", "script", "Terms of Use", "a", " ", "\n", "İpsum"]),
            max_size=8,
        ).map("".join),
        min_size=1,
        max_size=4,
    )
)  # fmt: skip
def test_c4_check_finds_what_each_text_holds(texts):
    def want(t: str) -> bool:
        low = t.lower()
        return "{" in t or "lorem ipsum" in low or normalize.may_have_boilerplate(low)

    got = lines._c4_check(segment(texts), texts)
    assert got.tolist() == [want(t) for t in texts]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["1", "23", "456", " ", "-", ".", "(", ")", "+", "a", "\n", "x1",
                                 "555-201-1234", "+44 20 7946 0958", "(555) 201", "١٢٣"]),
                max_size=30))  # fmt: skip
def test_phone_runs_find_what_the_whole_text_pattern_finds(pieces):
    text = "".join(pieces)
    want = pii._sub(pii._PHONE_RE, text, "phone", lambda m: pii._is_phone(m.group(0)))
    assert pii._sub_phones(text) == want


def test_packed_radix_sort_equals_np_sort():
    from pipeline.clean import ngrams

    rng = np.random.default_rng(5)
    for n in (10, 5000, 70000):
        pos = np.sort(rng.choice(1 << 24, n, replace=False)).astype(np.uint64)
        h = rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64) << np.uint64(1)
        h[rng.integers(0, n, n // 2)] = h[rng.integers(0, n, n // 2)]  # repeated hashes
        h[: n // 10] &= np.uint64(0xFFFF << 48)  # equal low digits, differing high ones
        key = (h & ~ngrams._POS_MASK) | pos
        assert (ngrams._sort_packed(key) == np.sort(key)).all()

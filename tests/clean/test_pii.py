"""PII redaction on a labelled synthetic set: recall per kind, and no false redactions."""

from __future__ import annotations

import numpy as np

from pipeline.clean.pii import PLACEHOLDER, redact


def _emails(rng):
    users = ["jane.doe", "j_smith42", "li.wei+news", "o.brien", "admin", "x.y-z"]
    hosts = ["example.com", "mail.example.co.uk", "uni-bonn.de", "sub.domain.org", "corp.io"]
    return [
        f"{users[rng.integers(6)]}{rng.integers(100)}@{hosts[rng.integers(5)]}" for _ in range(100)
    ]


def _urls(rng):
    out = []
    for _ in range(100):
        host = ["example.com", "docs.python.org", "a-b.co.uk", "x.io"][rng.integers(4)]
        path = ["", "/", "/a/b.html", "/search?q=data&page=2", "/wiki/Foo_(bar)"][rng.integers(5)]
        scheme = ["https://", "http://", "https://www.", "www."][rng.integers(4)]
        out.append(f"{scheme}{host}{path}")
    return out


def _ips(rng):
    v4 = [
        ".".join(str(x) for x in (rng.integers(1, 224), *rng.integers(0, 256, 3)))
        for _ in range(60)
    ]
    v6 = []
    for _ in range(40):
        groups = [f"{g:x}" for g in rng.integers(0, 65536, 8)]
        if rng.random() < 0.5:
            v6.append(":".join(groups))
        else:
            v6.append(f"2001:db8::{groups[0]}:{groups[1]}")
    return v4 + v6


def _phones(rng):
    def d(k):
        return "".join(str(x) for x in rng.integers(0, 10, k))

    shapes = [
        lambda: f"+1 ({rng.integers(200, 999)}) {rng.integers(200, 999)}-{d(4)}",
        lambda: f"({rng.integers(200, 999)}) {rng.integers(200, 999)}-{d(4)}",
        lambda: f"{rng.integers(200, 999)}-{rng.integers(200, 999)}-{d(4)}",
        lambda: f"{rng.integers(200, 999)}.{rng.integers(200, 999)}.{d(4)}",
        lambda: f"+44 20 {d(4)} {d(4)}",
        lambda: f"+49 30 {d(8)}",
        lambda: f"+7 495 {d(3)}-{d(2)}-{d(2)}",
        lambda: f"8 (495) {d(3)}-{d(2)}-{d(2)}",
        lambda: f"+33 1 {d(2)} {d(2)} {d(2)} {d(2)}",
        lambda: f"+81 3-{d(4)}-{d(4)}",
    ]
    return [shapes[i % len(shapes)]() for i in range(100)]


def _keys(rng):
    def s(alphabet, k):
        return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), k))

    an = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    shapes = [
        lambda: "sk_live_" + s(an, 24),
        lambda: "AKIA" + s("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16),
        lambda: "ghp_" + s(an, 36),
        lambda: "xoxb-" + s("0123456789", 12) + "-" + s(an, 24),
        lambda: "AIza" + s(an + "_-", 35),
        lambda: s("0123456789abcdef", 40),
        lambda: "eyJ" + s(an, 20) + ".eyJ" + s(an, 30) + "." + s(an, 43),
        lambda: s(an, 12) + "7Qx9" + s(an, 28),
    ]
    return [shapes[i % len(shapes)]() for i in range(100)]


TEMPLATES = [
    "Please write to {} if you have questions.",
    "The value ({}) was logged, then",
    "See {}, which explains it.",
    "{} is what they sent us.",
]


def test_recall_per_kind_on_labelled_set():
    rng = np.random.default_rng(3)
    sets = {
        "email": _emails(rng),
        "url": _urls(rng),
        "ip": _ips(rng),
        "phone": _phones(rng),
        "key": _keys(rng),
    }
    for kind, values in sets.items():
        hits = 0
        for i, value in enumerate(values):
            text = TEMPLATES[i % len(TEMPLATES)].format(value)
            out, counts = redact(text)
            if value not in out and PLACEHOLDER[kind] in out and counts[kind] == 1:
                hits += 1
        assert hits / len(values) >= 0.98, (kind, hits)


def test_the_word_length_pre_check_lets_the_shortest_key_through():
    """The pre-check skips key patterns in texts whose longest word is shorter than every key
    shape: a 15-character Slack token is a key (clean v2 skipped it under 20)."""
    text = "token xoxb-1234567890 here"
    out, counts = redact(text, ("key",), max(map(len, text.split())))
    assert counts["key"] == 1 and "xoxb" not in out and PLACEHOLDER["key"] in out


NEGATIVES = [
    "On 2024-01-15 at 12:30:45 the meeting moved to 15/01/2024 and then to 12.03.2024.",
    "We shipped v1.2.3 and version 1.2.3.4 on Python 3.11.2; Windows build 10.0.19041.1 too.",
    "It cost $1,234,567.89, about 1 000 000 people or 1.000.000 votes, 3.14159 and 50%.",
    "ISBN 978-3-16-148410-0, pages 12-15, the score was 3-2 in 1999 and 2005.",
    "Use std::vector or a::b in C++, meet at 10:30, room 101, No. 42, call it a day.",
    "The Mississippi river is 3,730 km long and its basin covers 3.2 million km2.",
    "Phone numbers are not in this sentence, nor are emails like name at domain dot com.",
    "Totals: 123 456 789 units, ratio 2.5:1, coordinates 48.8566, 2.3522 and 1e-10.",
]


def test_no_redaction_of_numbers_dates_versions_prose():
    for text in NEGATIVES:
        out, counts = redact(text)
        assert out == text, (text, counts)


def test_every_placeholder_is_one_default_special_token():
    """The tokenizer reserves exactly the placeholders clean writes: each encodes to one id."""
    from pipeline.tokenizer import DEFAULT_SPECIALS, PII_PLACEHOLDERS, Tokenizer

    assert set(PII_PLACEHOLDERS) == set(PLACEHOLDER.values())
    assert set(PLACEHOLDER.values()) <= set(DEFAULT_SPECIALS)
    tok = Tokenizer([], DEFAULT_SPECIALS)
    text, _ = redact("mail a@example.com or see https://example.com/x today", tuple(PLACEHOLDER))
    ids = tok.encode(text)
    assert tok.specials[PLACEHOLDER["email"]] in ids and tok.specials[PLACEHOLDER["url"]] in ids
    assert tok.decode(ids) == text

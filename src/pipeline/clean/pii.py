"""PII redaction: URLs, emails, secrets, IPv6, IPv4 and phone numbers become placeholders.

Placeholders are `<|url|>`, `<|email|>`, `<|key|>`, `<|ip|>`, `<|phone|>` (the tokenizer makes
them single tokens). Kinds run in that order so a URL holding an email or a key is one URL.
Candidates are matched by regex, then validated (address parsers, digit counts, context) so
ordinary numbers, dates, times, version strings and prose are left alone.
"""

from __future__ import annotations

import ipaddress
import re

import numpy as np

from pipeline.clean.charclass import DIGIT, char_classes
from pipeline.clean.segment import chunks

PII_KINDS = ("url", "email", "key", "ip", "phone")
PLACEHOLDER = {k: f"<|{k}|>" for k in PII_KINDS}

_URL_RE = re.compile(
    r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}]", re.IGNORECASE
)
_EMAIL_RE = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}\b"
)
_KEY_SHAPES = [
    r"(?:sk|pk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",  # Stripe
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}",  # OpenAI / Anthropic style
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key id
    r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",  # GitHub tokens
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"AIza[0-9A-Za-z_-]{35}",  # Google API key
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
]
_KEY_RE = re.compile(r"(?<![\w-])(?:" + "|".join(_KEY_SHAPES) + r")", re.DOTALL)
KEY_MIN_CHARS = 15  # the shortest key shape, Slack's "xoxb-" + 10 (clean v3; v2 assumed 20)
# long hex (>= 32) or base64 (>= 32) runs; validated: must mix letters and digits
_LONG_KEY_RE = re.compile(
    r"(?<![\w+/=-])(?:[0-9a-fA-F]{32,}|[A-Za-z0-9+/_-]{32,}={0,2})"
    r"(?![\w+/=-])"
)
_IPV6_RE = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|"
    r"(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])"
)
_IPV6_HINT = re.compile(r":[0-9A-Fa-f]{0,4}:")  # in every _IPV6_RE match; a fast ':' scan
_IPV4_RE = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?(?![\w]|\.\d)")
_VERSION_CONTEXT_RE = re.compile(
    r"(?:\bv|version|release|ver\.|build|python|rev)\s*$", re.IGNORECASE
)
_PHONE_RE = re.compile(
    r"(?<![\w+.-])(?:"
    r"(?:\d{1,3}[ .-]?)?\(\d{1,4}\)[ .-]?\d{2,4}(?:[ .-]\d{2,4}){0,3}"  # 8 (495) 123-45-67
    r"|\+\d{1,3}[ .-]?\(?\d{1,4}\)?(?:[ .-]?\d{2,4}){1,4}"  # +1 (555) 201-1234, +44 20 7946 0958
    r"|\d{1,4}(?:[ .-]\d{1,4}){1,5}"  # 555-201-1234, 030 1234 5678
    r")(?![\w]|[.-]\d)"
)
# a run of the characters phone matches are made of (digits, " .-()+"), from a character a match
# can start with, 7 or more long: every _PHONE_RE match lies in one such run (it is bounded by a
# character no match holds), and one that _is_phone accepts needs >= 7 digits
_PHONE_RUN_RE = re.compile(r"[\d(+][\d .()+-]{6,}")
_DATE_RE = re.compile(r"(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})")


def _is_long_key(s: str) -> bool:
    has_digit = any(c.isdigit() for c in s)
    has_alpha = any(c.isalpha() for c in s)
    if not (has_digit and has_alpha):
        return False  # a long word or a long number is not a key
    if all(c in "0123456789abcdefABCDEF" for c in s):
        return True
    # base64: needs mixed case and >= 4 digits, which prose, paths and identifiers rarely have
    return (
        any(c.isupper() for c in s)
        and any(c.islower() for c in s)
        and sum(c.isdigit() for c in s) >= 4
    )


def _is_ipv6(s: str) -> bool:
    groups = [g for g in s.split(":") if g]
    if len(groups) < 2 or sum(len(g) for g in groups) < 4:
        return False  # "a::b", "12:30": C++ scopes and clock times
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def _is_ipv4(m: re.Match[str]) -> bool:
    s = m.group(0).split("/")[0]
    if any(len(p) > 1 and p[0] == "0" for p in s.split(".")):
        return False  # "01.02.2024.1" is not an address
    try:
        ipaddress.IPv4Address(s)
    except ValueError:
        return False
    before = m.string[max(0, m.start() - 12) : m.start()]
    return not _VERSION_CONTEXT_RE.search(before)


def _is_phone(s: str) -> bool:
    digits = sum(c.isdigit() for c in s)
    if digits < 7 or digits > 15:
        return False
    if s.startswith("+") or "(" in s:
        return digits >= 8
    if _DATE_RE.fullmatch(s):
        return False
    groups = re.split(r"[ .-]", s)
    if len(set(c for c in s if not c.isdigit())) > 1:
        return False  # mixed separators without + or (): "1.2 3-4" is not a number we dial
    # thousands (1 000 000, 1.000.000) and decimals are numbers, not phones
    if all(len(g) == 3 for g in groups[1:]) and len(groups[0]) <= 3:
        return False
    return digits >= 9 or (
        len(groups) >= 2 and digits >= 7 and len(groups[-1]) == 4 and len(groups[0]) == 3
    )


# a key shape (_KEY_SHAPES) holds one of these literals: C-speed `in` checks before the regex
_KEY_HINTS = (
    "sk_", "pk_", "rk_", "sk-", "AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "github_pat_", "xox", "AIza", "glpat-", "eyJ", "-----BEGIN",
)  # fmt: skip


def may_have_key(text: str) -> bool:
    """False only if no _KEY_HINTS literal is in `text` (True for every text that holds one),
    in 7 scans instead of 17 (each absent literal costs a scan of the whole text): the nine
    literals with "_" are looked for only in texts with a "_" (few), and then as "k_" (sk_,
    pk_, rk_), "gh" (gh?_) and "github_pat_"; the three with "-" only in texts with a "-"."""
    if "_" in text and ("k_" in text or "gh" in text or "github_pat_" in text):
        return True
    if "-" in text and ("sk-" in text or "glpat-" in text or "-----BEGIN" in text):
        return True
    return "xox" in text or "eyJ" in text or "AIza" in text or "AKIA" in text or "ASIA" in text


def digit_hints(texts: list[str]) -> np.ndarray:
    """bool [len(texts), 2]: (may hold an IPv4 address, may hold a phone number), from one
    numpy pass over the batch's digits and dots. An IPv4 address has three dots, each between
    two digits and each within 4 characters of the next (1-3 digits between); a phone number
    that _is_phone accepts has >= 7 digits each within 3 of the next (<= 2 separators). Digits
    here are Unicode N*, a superset of the regexes' \\d, so False is certain (no pattern can
    match) and True only means "run the pattern" (a year or a price is not an address)."""
    out = np.zeros((len(texts), 2), bool)
    for lo, hi in chunks([len(t) for t in texts]):  # ~1M characters: arrays stay in cache
        out[lo:hi] = _digit_hints(texts[lo:hi])
    return out


def _digit_hints(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 2), bool)
    # joined by 4 newlines: no run of digits 3 apart nor chain of dots 4 apart crosses two
    # texts, so runs need no document ids (only the runs found look theirs up)
    sep = "\n" * 4
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    starts = np.zeros(len(texts), np.int64)
    np.cumsum(lengths[:-1] + len(sep), out=starts[1:])
    cp, cls = char_classes(sep.join(texts))
    digit = cls == DIGIT
    pos = np.flatnonzero(digit)
    if len(pos) < 4:
        return out
    # IPv4: dots between digits, three in a row each <= 4 characters after the one before
    dots = np.flatnonzero(cp[1:-1] == 0x2E) + 1
    dots = dots[digit[dots - 1] & digit[dots + 1]]
    if len(dots) >= 3:
        gap = np.diff(dots) <= 4
        chain = dots[:-2][gap[:-1] & gap[1:]]
        out[np.searchsorted(starts, chain, side="right") - 1, 0] = True
    # phone: >= 7 digits each within 3 characters of the next
    brk = np.flatnonzero(np.diff(pos) > 3)
    run_start = np.concatenate(([0], brk + 1))
    run_len = np.diff(np.append(run_start, len(pos)))
    found = pos[run_start[run_len >= 7]]
    out[np.searchsorted(starts, found, side="right") - 1, 1] = True
    return out


_LOCAL_END = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_LABEL_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def _may_email(text: str) -> bool:
    """An '@' between a local-part character and a domain letter or digit, as every _EMAIL_RE
    match has: the regex backtracks up to 64 characters at each letter (~2 MB/s), and most
    '@' in text are handles, `@-@` of tokenised numbers or code."""
    i = text.find("@", 1)
    while i != -1:
        if text[i - 1] in _LOCAL_END and text[i + 1 : i + 2] in _LABEL_START:
            return True
        i = text.find("@", i + 1)
    return False


def _sub(pattern: re.Pattern[str], text: str, kind: str, check) -> tuple[str, int]:
    if check is None:
        return pattern.subn(PLACEHOLDER[kind], text)
    count = 0
    placeholder = PLACEHOLDER[kind]

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        if not check(m):
            return m.group(0)
        count += 1
        return placeholder

    return pattern.sub(repl, text), count


def _sub_phones(text: str) -> tuple[str, int]:
    """= _sub(_PHONE_RE, text, "phone", _is_phone), ~2x faster: the pattern runs only inside the
    _PHONE_RUN_RE runs with >= 7 digits (finditer's pos keeps the look-behind on the text
    before; endpos 2 past the run keeps the look-ahead). No match crosses a run's edge, so the
    matches, and which ones are replaced, are those sub finds over the whole text."""
    parts: list[str] = []
    last = count = 0
    n = len(text)
    for run in _PHONE_RUN_RE.finditer(text):
        if sum(c.isdigit() for c in run.group(0)) < 7:
            continue
        a, b = run.span()
        for m in _PHONE_RE.finditer(text, a, min(n, b + 2)):
            if m.start() >= b:
                break
            if _is_phone(m.group(0)):
                parts += (text[last : m.start()], PLACEHOLDER["phone"])
                last = m.end()
                count += 1
    if not count:
        return text, 0
    parts.append(text[last:])
    return "".join(parts), count


def redact(
    text: str,
    kinds: tuple[str, ...] = PII_KINDS,
    max_word_length: int | None = None,
    has_digits: bool = True,
    may_ipv4: bool = True,
    may_phone: bool = True,
) -> tuple[str, dict[str, int]]:
    """Replace PII of the given kinds by placeholders; returns (text, replacements per kind).

    Each pattern runs only where a cheap check says it can match (the patterns cost ~20 MB/s
    each, the checks ~1 GB/s): a URL needs "://" or "www.", an email an "@" between a
    local-part character and a letter or digit (_may_email), a key shape its
    literal prefix (may_have_key) and a long key a word of >= 32 characters (every key is a
    run of >= KEY_MIN_CHARS non-space characters), IPv6 "::" or 5 colons; IPv4 addresses need
    three dots between digits and phone numbers digits close together (`has_digits`,
    `may_ipv4`, `may_phone`: digit_hints).
    """
    counts = dict.fromkeys(kinds, 0)
    if "url" in kinds and (
        "://" in text or (("w." in text or "W." in text) and "www." in text.lower())
    ):
        text, counts["url"] = _sub(_URL_RE, text, "url", None)
    if "email" in kinds and "@" in text and _may_email(text):
        text, counts["email"] = _sub(_EMAIL_RE, text, "email", None)
    if "key" in kinds and (max_word_length is None or max_word_length >= KEY_MIN_CHARS):
        n1 = n2 = 0
        if may_have_key(text):
            text, n1 = _sub(_KEY_RE, text, "key", None)
        if (max_word_length is None or max_word_length >= 32) and any(
            len(w) >= 32 for w in text.split()
        ):  # a long key is one whitespace token of >= 32 characters
            text, n2 = _sub(_LONG_KEY_RE, text, "key", lambda m: _is_long_key(m.group(0)))
        counts["key"] = n1 + n2
    if "ip" in kinds:
        n6 = n4 = 0
        if ("::" in text or text.count(":") >= 5) and _IPV6_HINT.search(text):
            text, n6 = _sub(_IPV6_RE, text, "ip", lambda m: _is_ipv6(m.group(0)))
        if has_digits and may_ipv4 and "." in text:
            text, n4 = _sub(_IPV4_RE, text, "ip", _is_ipv4)
        counts["ip"] = n6 + n4
    if "phone" in kinds and has_digits and may_phone:
        text, counts["phone"] = _sub_phones(text)
    return text, counts

"""Text normalisation: control characters, HTML, Unicode NFKC, C4 boilerplate lines, whitespace.

Each step is switchable; `normalize_text` returns the new text and what each step changed.
Single newlines (line structure) and blank lines (paragraph breaks) survive: later rules use them.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

# C0/C1 controls except \t and \n, BOM, non-characters and lone surrogates: never meaningful text
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff\ufffe\uffff\ud800-\udfff]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")  # lone surrogates cannot be written as UTF-8
_CR_RE = re.compile(r"\r\n?")
_DROP_BLOCK_RE = re.compile(
    r"<(script|style|noscript|template)\b[^>]*>.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL
)
# only known tag names: "a < b and c > d" or "<T>" in code is not HTML and must survive
_BLOCK_TAGS = (
    "address|article|aside|blockquote|body|br|dd|div|dl|dt|fieldset|figcaption|figure|"
    "footer|form|h[1-6]|head|header|hr|html|li|main|nav|ol|p|pre|section|table|tbody|"
    "td|tfoot|th|thead|title|tr|ul"
)
_INLINE_TAGS = (
    "a|abbr|b|bdi|bdo|big|button|caption|cite|code|col|colgroup|data|del|dfn|em|font|"
    "i|iframe|img|input|ins|kbd|label|legend|link|mark|meta|option|picture|q|s|samp|"
    "select|small|source|span|strong|sub|sup|svg|textarea|time|tt|u|var|video|wbr|"
    "script|style|noscript|template|!doctype"
)
_BLOCK_TAG_RE = re.compile(rf"</?(?:{_BLOCK_TAGS})(?:\s[^<>]*)?/?>", re.IGNORECASE)
_INLINE_TAG_RE = re.compile(rf"</?(?:{_INLINE_TAGS})(?:\s[^<>]*)?/?>", re.IGNORECASE)
_ENTITY_RE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ODD_SPACE_RE = re.compile(r"[^\S\n ]")
_MANY_NL_RE = re.compile(r"\n{3,}")
# C4 (TFDS c4_utils): lines with "javascript" or a policy phrase are boilerplate and are removed
# (matched on lower-cased text: an IGNORECASE alternation is ~10x slower)
BOILERPLATE_RE = re.compile(
    r"javascript|terms of use|privacy policy|cookie policy|uses cookies|"
    r"use of cookies|use cookies"
)
BOILERPLATE_HINTS = ("javascript", "terms of use", "privacy policy", "cookie")


@dataclass(frozen=True)
class NormalizeOptions:
    remove_control: bool = True
    strip_html: bool = True
    nfkc: bool = True
    remove_boilerplate_lines: bool = True
    fold_whitespace: bool = True


NORMALIZE_COUNTERS = (
    "docs_control_removed",
    "docs_html_stripped",
    "docs_nfkc_changed",
    "boilerplate_lines_removed",
)


_CONTROL_BYTES = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])


# in UTF-8: C1 controls are \xc2\x80-\x9f; BOM, U+FFFE, U+FFFF three-byte sequences
_C1_BYTES_RE = re.compile(rb"\xc2[\x80-\x9f]|\xef\xbb\xbf|\xef\xbf[\xbe\xbf]")


def _may_have_control(text: str, data: bytes | None = None) -> bool:
    """A C-speed check on the UTF-8 bytes (the regex costs ~30 ns/char): bytes.translate for
    the ASCII controls, a byte regex for C1, BOM and non-characters. Exact, so False means
    _CONTROL_RE has nothing to remove; a text with lone surrogates is not checked (True).
    `data`: the text's UTF-8 bytes where the caller has them."""
    if text.isascii():
        data = text.encode("ascii")
        return len(data.translate(None, _CONTROL_BYTES)) != len(data)
    if data is None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return True  # lone surrogates
    if len(data.translate(None, _CONTROL_BYTES)) != len(data):
        return True
    return (b"\xc2" in data or b"\xef" in data) and _C1_BYTES_RE.search(data) is not None


def _utf8(text: str) -> bytes | None:
    """The text's UTF-8 bytes, None if it holds lone surrogates."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def strip_html(text: str) -> str:
    """Drop script/style blocks and comments, turn block tags into newlines, drop inline tags,
    unescape entities. Text without '<' or '&' is returned unchanged."""
    if "<" in text:
        text = _DROP_BLOCK_RE.sub("", text)
        text = _BLOCK_TAG_RE.sub("\n", text)
        text = _INLINE_TAG_RE.sub("", text)
    if "&" in text:
        text = _ENTITY_RE.sub(lambda m: html.unescape(m.group(0)), text)
    return text


def may_have_boilerplate(low: str) -> bool:
    """Cheap substring pre-check on lower-cased text before the per-line regex."""
    return any(h in low for h in BOILERPLATE_HINTS)


_BOILERPLATE_HINT_BYTES = tuple(h.encode("ascii") for h in BOILERPLATE_HINTS)


def _may_have_boilerplate_text(text: str) -> bool:
    """may_have_boilerplate(text.lower()), without lower-casing a non-ASCII text (~5x slower
    than an ASCII one): the hints are ASCII letters and spaces, and U+212A KELVIN SIGN is the
    only non-ASCII character whose lower case holds an ASCII letter that a hint can use (U+0130
    lowers to "i" + U+0307, and no hint has an "i" last), so the hints are found in the ASCII
    bytes of the text, every other character replaced by "?", lower-cased."""
    if text.isascii():
        low = text.lower()
        return any(h in low for h in BOILERPLATE_HINTS)
    if "\u212a" in text:
        return may_have_boilerplate(text.lower())
    data = text.encode("ascii", "replace").lower()
    return any(h in data for h in _BOILERPLATE_HINT_BYTES)


def remove_boilerplate_lines(text: str) -> tuple[str, int]:
    """C4's line rule: drop every line mentioning javascript or a cookie/terms/privacy phrase."""
    if not _may_have_boilerplate_text(text):
        return text, 0
    lines = text.split("\n")
    kept = [ln for ln in lines if not BOILERPLATE_RE.search(ln.lower())]
    return "\n".join(kept), len(lines) - len(kept)


# the whitespace other than " " and "\n" (str.isspace, = the regexes' [^\S\n ]) left in a text
# once controls are removed, "\r" is replaced and NFKC has run: every other one is a control or
# has a compatibility decomposition to " " (tests/clean/test_fastpath.py checks every character)
NFKC_ODD_SPACES = ("\u1680", "\u2028", "\u2029")


def _has_odd_space(text: str, nfkc_clean: bool) -> bool:
    if nfkc_clean:
        return any(c in text for c in NFKC_ODD_SPACES)
    return _ODD_SPACE_RE.search(text) is not None


def fold_whitespace(text: str, nfkc_clean: bool = False) -> str:
    """Runs of spaces/tabs -> one space; no space at line edges; at most one blank line.
    `nfkc_clean`: the text has no control character, "\r" nor text NFKC would change (as
    normalize_text leaves it with remove_control and nfkc), so only NFKC_ODD_SPACES and "\t"
    can be odd whitespace."""
    # substring pre-checks first: C-speed scans, the regexes only run where they have work
    if "  " in text or "\t" in text or (not text.isascii() and _has_odd_space(text, nfkc_clean)):
        # = re.sub(r"[^\S\n]{2,}|[^\S\n ]", " ") then re.sub(r" \n ?|\n ", "\n") (runs fold,
        # then the spaces at line edges go; strip() below takes the text's own edges), ~30x
        # faster than the regexes: str.split() cuts at the same whitespace as [^\S\n]
        text = "\n".join([" ".join(line.split()) for line in text.split("\n")])
    elif " \n" in text or "\n " in text:
        # = re.sub(r" \n ?|\n ", "\n"): with no double space, a line edge holds <= 1 space
        text = "\n".join([line.strip(" ") for line in text.split("\n")])
    if "\n\n\n" in text:
        text = _MANY_NL_RE.sub("\n\n", text)
    return text.strip()


def nfkc(text: str) -> str:
    """unicodedata.normalize("NFKC", text), line by line where the text is not normalised:
    most of its lines are, and normalize() returns those at once (its quick check) but
    decomposes and recomposes the whole of a text with one line that is not. "\n" has no
    decomposition, is a starter (class 0) and composes with nothing on either side, so
    NFKC(a + "\n" + b) = NFKC(a) + "\n" + NFKC(b) (tests/clean/test_fastpath.py)."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    if "\n" not in text:
        return unicodedata.normalize("NFKC", text)
    return "\n".join([unicodedata.normalize("NFKC", line) for line in text.split("\n")])


def normalize_text(text: str, opts: NormalizeOptions) -> tuple[str, list[int]]:
    """Apply the enabled steps in a fixed order; returns (text, counters in NORMALIZE_COUNTERS)."""
    counts = [0, 0, 0, 0]
    data = None if text.isascii() else _utf8(text)
    if data is None and not text.isascii():
        new = _SURROGATE_RE.sub("", text)  # always: the output part could not be written
        counts[0] = int(len(new) != len(text))
        text = new
    if "\r" in text:  # (\r is no control here: the bytes before this say the same)
        text = _CR_RE.sub("\n", text)
    if opts.remove_control and _may_have_control(text, data):
        new = _CONTROL_RE.sub("", text)
        counts[0] |= int(len(new) != len(text))
        text = new
    if opts.strip_html and ("<" in text or "&" in text):
        new = strip_html(text)
        counts[1] = int(new != text)
        text = new
    if opts.nfkc and not text.isascii():
        try:
            new = nfkc(text)
        except UnicodeError:  # unreachable once controls are removed; kept for remove_control=False
            new = text
        counts[2] = int(new != text)
        text = new
    if opts.remove_boilerplate_lines:
        text, counts[3] = remove_boilerplate_lines(text)
    if opts.fold_whitespace:
        text = fold_whitespace(text, opts.remove_control and opts.nfkc)
    return text, counts

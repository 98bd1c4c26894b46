"""HTML to text: a well-kept extractor when installed (resiliparse, trafilatura: the `web`
extra), else a built-in tag stripper; plus the charset sniffing web payloads need.

`extract_text(html, extractor)` is pure. `auto` picks resiliparse, then trafilatura, then the
built-in `tags`; which one ran is reported (download stats `html_extractor`), since the text
and so the output bytes depend on it. docs/sources.md gives the measured choice.
"""

from __future__ import annotations

import codecs
import html as html_lib
import importlib
import re
from collections.abc import Callable

EXTRACTORS = ("auto", "resiliparse", "trafilatura", "tags")
_PREFERENCE = ("resiliparse", "trafilatura")  # auto: the first importable (docs/sources.md)

# the built-in fallback: drop invisible blocks, break lines at block tags, strip the rest
_INVISIBLE = re.compile(
    r"<(script|style|noscript|template|head|svg|iframe)\b[^>]*>.*?</\1\s*>", re.I | re.S
)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_BLOCK = re.compile(
    r"</?(p|div|br|li|ul|ol|h[1-6]|tr|table|section|article|header|footer|nav|main|aside|"
    r"blockquote|pre|dd|dt|dl|form|hr|title|body|html)\b[^>]*>",
    re.I,
)
_TAG = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANKS = re.compile(r"\n\s*\n+")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.I)


def strip_tags(html: str) -> str:
    """The built-in extractor: visible text of `html` with one line per block element, entities
    unescaped, spaces folded. Keeps navigation and footers (no main-content heuristics)."""
    text = _COMMENT.sub(" ", html)
    text = _INVISIBLE.sub(" ", text)
    text = _BLOCK.sub("\n", text)
    text = html_lib.unescape(_TAG.sub(" ", text))
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", "\n".join(line for line in lines if line)).strip()


def _resiliparse(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, alt_texts=False, list_bullets=True)


def _trafilatura(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html, include_comments=False, deduplicate=False) or ""


_FUNCS: dict[str, Callable[[str], str]] = {
    "resiliparse": _resiliparse,
    "trafilatura": _trafilatura,
    "tags": strip_tags,
}
_MODULE = {"resiliparse": "resiliparse.extract.html2text", "trafilatura": "trafilatura"}


def available(name: str) -> bool:
    """Whether extractor `name` can run here (`tags` always can)."""
    if name == "tags":
        return True
    try:
        importlib.import_module(_MODULE[name])
    except ImportError:
        return False
    return True


def resolve(name: str) -> str:
    """The extractor `name` means here: `auto` -> the first installed of resiliparse,
    trafilatura, else `tags`. A named extractor that is not installed raises ImportError."""
    if name == "auto":
        return next((n for n in _PREFERENCE if available(n)), "tags")
    if not available(name):
        raise ImportError(f"html extractor {name!r} is not installed (pip install '.[web]')")
    return name


def extract_text(html: str, extractor: str) -> str:
    """Text of one HTML page with a resolved extractor name (resiliparse, trafilatura, tags)."""
    return _FUNCS[extractor](html).strip()


def charset(content_type: str | None, body: bytes) -> str:
    """The payload's charset: the header's, else a <meta charset> in the first 2 KB, else UTF-8;
    a name Python does not know falls back to UTF-8."""
    name = None
    if content_type and (m := _HEADER_CHARSET.search(content_type)):
        name = m.group(1)
    elif m := _META_CHARSET.search(body[:2048]):
        name = m.group(1).decode("ascii", "replace")
    if not name:
        return "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return "utf-8"


def decode(body: bytes, content_type: str | None) -> str:
    """Bytes of a web payload as text (undecodable bytes become U+FFFD: a page is never lost)."""
    return body.decode(charset(content_type, body), "replace")

"""URL and domain block lists: parse their lines, match a document's URL against them.

A domain list holds one domain per line (`example.com`; `*.example.com` and a hosts-file line
`0.0.0.0 example.com` mean the same): it blocks that host and every subdomain. A URL list holds
URL patterns, `[scheme://]host[/path-prefix]`, where `*` in the path matches any characters:
`example.com/ads/` blocks every URL of example.com or a subdomain whose path starts with /ads/.
`#` starts a comment; blank lines are skipped. Parsing raises DataError naming file:line. No I/O
here: the clean stage reads the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.errors import DataError

DOMAIN_REASON = "domain_blocklist_v1"
URL_REASON = "url_blocklist_v1"

_LABEL = re.compile(r"^[\w-]+$")  # \w: Unicode letters and digits (IDN hosts as written)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
_HOSTS_IP = ("0.0.0.0", "127.0.0.1", "::", "::1")  # hosts-file block lists


@dataclass(frozen=True)
class Blocklist:
    domains: frozenset[str] = frozenset()  # lower-case hosts; subdomains match
    # host -> path patterns (anchored at the path's start); "" blocks the whole host
    urls: dict[str, tuple[re.Pattern[str], ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.domains and not self.urls


def _clean_line(line: str) -> str:
    return line.split("#", 1)[0].strip()


def _check_host(host: str, where: str, line: str) -> str:
    host = host.lower().rstrip(".")
    host = host.removeprefix("*.")
    labels = host.split(".")
    if not host or not all(label and _LABEL.match(label) for label in labels):
        raise DataError(where, f"{line!r} is not a domain (expected e.g. example.com)")
    return host


def parse_domains(lines: Iterable[str], name: str) -> frozenset[str]:
    """The domains of a domain list file named `name` (for messages)."""
    out = set()
    for lineno, raw in enumerate(lines, start=1):
        line = _clean_line(raw)
        if not line:
            continue
        parts = line.split()
        if len(parts) == 2 and parts[0] in _HOSTS_IP:
            line = parts[1]
        elif len(parts) != 1:
            raise DataError(f"{name}:{lineno}", f"{line!r}: one domain per line expected")
        if "/" in line or ":" in line:
            raise DataError(
                f"{name}:{lineno}",
                f"{line!r} is a URL, not a domain; put URL patterns in clean.url_blocklist",
            )
        out.add(_check_host(line, f"{name}:{lineno}", line))
    return frozenset(out)


def parse_url_patterns(lines: Iterable[str], name: str) -> dict[str, tuple[re.Pattern[str], ...]]:
    """host -> compiled path patterns of a URL list file named `name`."""
    out: dict[str, list[re.Pattern[str]]] = {}
    for lineno, raw in enumerate(lines, start=1):
        line = _clean_line(raw)
        if not line:
            continue
        where = f"{name}:{lineno}"
        if len(line.split()) != 1:
            raise DataError(where, f"{line!r}: one URL pattern per line expected (no spaces)")
        rest = _SCHEME.sub("", line)
        host, slash, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]  # user@host:port -> host
        if "*" in host.removeprefix("*."):
            raise DataError(where, f"{line!r}: '*' only in the path or as a leading '*.'")
        host = _check_host(host, where, line)
        regex = ".*".join(re.escape(piece) for piece in (slash + path).split("*"))
        out.setdefault(host, []).append(re.compile(regex))
    return {h: tuple(p) for h, p in out.items()}


def merge(lists: Iterable[Blocklist]) -> Blocklist:
    domains: set[str] = set()
    urls: dict[str, list[re.Pattern[str]]] = {}
    for b in lists:
        domains |= b.domains
        for h, pats in b.urls.items():
            urls.setdefault(h, []).extend(pats)
    return Blocklist(frozenset(domains), {h: tuple(p) for h, p in urls.items()})


def split_url(url: str) -> tuple[str, str] | None:
    """(lower-case host, path with query) of an absolute URL, or of `host/path` without a
    scheme; None when there is no host."""
    rest = _SCHEME.sub("", url.strip())
    host, slash, path = rest.partition("/")
    for sep in ("?", "#"):  # a URL like example.com?x=1 has no slash before its query
        if sep in host:
            host, tail = host.split(sep, 1)
            path, slash = sep + tail + slash + path, ""
    host = host.rsplit("@", 1)[-1]
    if host.startswith("["):  # IPv6 literal
        host = host.split("]", 1)[0] + "]"
    else:
        host = host.split(":", 1)[0]
    host = host.lower().rstrip(".")
    return (host, slash + path) if host else None


def _suffixes(host: str) -> list[str]:
    """example.co.uk -> [example.co.uk, co.uk, uk]: the host and each parent domain."""
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


def block_reason(url: str | None, blocklist: Blocklist) -> str | None:
    """The reason `url` is blocked (domain first, then URL patterns), or None."""
    if not url:
        return None
    parts = split_url(url)
    if parts is None:
        return None
    host, path = parts
    suffixes = _suffixes(host)
    if blocklist.domains and any(s in blocklist.domains for s in suffixes):
        return DOMAIN_REASON
    if blocklist.urls:
        for s in suffixes:
            for pat in blocklist.urls.get(s, ()):
                if pat.match(path or "/"):
                    return URL_REASON
    return None


def block_reasons(urls: list[str | None], blocklist: Blocklist) -> list[str | None]:
    """block_reason of each URL (None: kept, or no URL)."""
    return [block_reason(u, blocklist) for u in urls]

"""URL and domain block lists: parsing, matching (subdomains), the clean stage's rule and its
errors, on list files and documents the test writes."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.clean import urls
from pipeline.errors import DataError, RecipeError
from pipeline.inspect import inspect_rejected
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.report import load_report
from synth_text import docs


def test_domains_match_the_host_and_every_subdomain_only():
    bl = urls.Blocklist(
        domains=urls.parse_domains(["spam.com", "# comment", "", "*.Ads.NET."], "d")
    )
    assert bl.domains == {"spam.com", "ads.net"}
    blocked = [
        "https://spam.com/",
        "http://www.spam.com/a?b=1",
        "https://x.y.SPAM.com:8080/p",
        "spam.com/no-scheme",
        "https://user@tracker.ads.net",
    ]
    kept = ["https://notspam.com/", "https://spam.com.evil.org/", "https://ads.network/", None, ""]
    assert [urls.block_reason(u, bl) for u in blocked] == [urls.DOMAIN_REASON] * 5
    assert [urls.block_reason(u, bl) for u in kept] == [None] * 5


def test_url_patterns_are_host_plus_path_prefix_with_wildcards():
    lines = ["example.com/ads/", "https://shop.example.org/*/checkout", "whole.example.net"]
    bl = urls.Blocklist(urls=urls.parse_url_patterns(lines, "u"))
    cases = {
        "https://example.com/ads/banner.png": urls.URL_REASON,
        "https://cdn.example.com/ads/x": urls.URL_REASON,  # subdomain of the pattern's host
        "https://example.com/news/ads/": None,  # a prefix of the path, not anywhere in it
        "https://example.com/": None,
        "http://shop.example.org/cart/42/checkout?step=2": urls.URL_REASON,
        "http://shop.example.org/checkout": None,
        "https://whole.example.net": urls.URL_REASON,  # no path in the pattern: the whole host
        "https://a.whole.example.net/x": urls.URL_REASON,
    }
    assert {u: urls.block_reason(u, bl) for u in cases} == cases


def test_hosts_file_lines_and_split_url():
    assert urls.parse_domains(["0.0.0.0 tracker.io", "127.0.0.1 x.io  # c"], "h") == {
        "tracker.io",
        "x.io",
    }
    assert urls.split_url("HTTPS://Ex.COM?q=1") == ("ex.com", "?q=1")
    assert urls.split_url("http://[::1]:80/p") == ("[::1]", "/p")
    assert urls.split_url("https:///nohost") is None


@pytest.mark.parametrize(
    "line, message",
    [
        ("bad domain here", "one domain per line"),
        ("https://example.com/x", "is a URL, not a domain"),
        ("exa mple", "one domain per line"),
        ("ex..com", "is not a domain"),
    ],
)
def test_bad_domain_lines_name_the_file_and_line(line, message):
    with pytest.raises(DataError, match=f"lists.txt:3.*{message}"):
        urls.parse_domains(["ok.com", "# fine", line], "lists.txt")


def test_bad_url_patterns_name_the_file_and_line():
    with pytest.raises(DataError, match=r"u.txt:2: .*'\*' only in the path"):
        urls.parse_url_patterns(["a.com/x", "*bad*.com/x"], "u.txt")
    with pytest.raises(DataError, match="u.txt:1: .*no spaces"):
        urls.parse_url_patterns(["a.com /x"], "u.txt")


def _web_jsonl(path, n=12):
    """n documents that pass the text rules, with URLs: every third on spam.com (or a subdomain),
    one under example.org/ads/, one without a URL."""
    texts = docs(n, seed=3)
    rows = []
    for i, t in enumerate(texts):
        url = f"https://site{i}.example.org/page"
        if i % 3 == 0:
            url = f"https://{'www.' if i % 2 else ''}spam.com/{i}"
        if i == 4:
            url = "https://example.org/ads/4"
        rows.append({"id": f"d{i}", "text": t, "url": None if i == 5 else url})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_clean_drops_blocked_urls_with_their_reasons(tmp_path):
    """Parquet input with a url column (download.url_field): 4 spam.com pages (ids 0,3,6,9) by
    domain, 1 by URL pattern; the row without a URL is kept and counted. Dropped rows are
    inspectable."""
    rows = _web_jsonl(tmp_path / "web.jsonl")
    t = pa.table({k: [r[k] for r in rows] for k in ("id", "text", "url")})
    pq.write_table(t, tmp_path / "web.parquet")
    (tmp_path / "domains.txt").write_text("# spam\nspam.com\n")
    (tmp_path / "urls.txt").write_text("example.org/ads/\n")
    run = tmp_path / "run"
    clean = {
        "domain_blocklist": str(tmp_path / "domains.txt"),
        "url_blocklist": [str(tmp_path / "urls.txt")],
        "min_words": 5,
        "min_stop_words": None,  # the test's prose is not about stop words
        "redact_pii": [],
    }
    download = {
        "source": "parquet",
        "path": str(tmp_path / "web.parquet"),
        "url_field": "url",
        "docs_per_part": 5,
    }
    run_stages(run, {"download": download, "clean": clean})
    run_stages(tmp_path / "w2", {"download": download, "clean": clean}, workers=2)
    for p in sorted((run / "clean").rglob("*.parquet")):  # same bytes with 2 workers
        assert p.read_bytes() == (tmp_path / "w2" / p.relative_to(run)).read_bytes()
    st = next(s["stats"] for s in load_report(run)["stages"] if s["stage"] == "clean")
    assert st["dropped_domain_blocklist_v1"] == 4 and st["dropped_url_blocklist_v1"] == 1
    assert st["docs_without_url"] == 1
    assert st["docs_in"] == st["docs_out"] + sum(
        v for k, v in st.items() if k.startswith("dropped_")
    )
    kept = pa.concat_tables([read_table(p) for p in Manifest.load(run).parts("clean")])
    assert not any("spam.com" in (u or "") for u in kept.column("url").to_pylist())
    rejected = pa.concat_tables([read_table(p) for p in sorted((run / "clean/rejected").glob("*"))])
    by_id = dict(
        zip(rejected.column("id").to_pylist(), rejected.column("reasons").to_pylist(), strict=True)
    )
    assert by_id["d3"] == [urls.DOMAIN_REASON] and by_id["d4"] == [urls.URL_REASON]
    assert "spam.com" in inspect_rejected(run, "clean", urls.DOMAIN_REASON, 5, 300)


def test_bad_list_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "domains.txt").write_text("ok.com\nnot a domain\n")
    download = {"source": "toy", "max_docs": 20}
    with pytest.raises(DataError, match=r"domains.txt:2: 'not a domain'"):
        run_stages(
            tmp_path / "r",
            {"download": download, "clean": {"domain_blocklist": str(tmp_path / "domains.txt")}},
        )
    with pytest.raises(RecipeError, match=r"clean.url_blocklist.*no file matches"):
        run_stages(
            tmp_path / "r",
            {"download": download, "clean": {"url_blocklist": str(tmp_path / "nope.txt")}},
        )
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9.com\n")
    with pytest.raises(DataError, match=r"latin.txt: cannot read the domain_blocklist file"):
        run_stages(
            tmp_path / "r",
            {"download": download, "clean": {"domain_blocklist": str(tmp_path / "latin.txt")}},
        )


def test_missing_url_column_is_one_line(tmp_path):
    (tmp_path / "d.txt").write_text("spam.com\n")
    download = {"source": "toy", "max_docs": 20}
    clean = {"domain_blocklist": str(tmp_path / "d.txt"), "url_field": "link"}
    with pytest.raises(
        DataError, match=r"no 'link' column for the URL block lists \(clean.url_field\)"
    ):
        run_stages(tmp_path / "r", {"download": download, "clean": clean})

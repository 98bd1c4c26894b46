"""Line, paragraph and C4 statistics for a batch of documents at once, from its segmentation.

Raw lines are the spans between newlines of the batch's joined text, stripped with numpy;
repeated lines and paragraphs are grouped by hash, then confirmed by comparing the strings
(so a hash collision cannot count a repeat). Sentence ends are counted from character flags,
exactly as textstats' regexes count them (tests/clean/test_fastpath.py checks both).

The line rules read logical lines (textstats.logical_lines): in a hard-wrapped text, or after
a label line, raw lines are joined by one space. Here a logical line is a run of consecutive
raw lines; its counts are sums over them, its end is its last raw line's end, and its hash is
the hash of the joined string, built from the raw lines' hashes. Only a text where C4 must look
for "lorem ipsum", `{` or a policy phrase line by line is left to textstats' per-document code:
`line_stats_batch` says which documents it did.
"""

from __future__ import annotations

import bisect

import numpy as np

from pipeline.clean.charclass import SPACE, UNSPACED
from pipeline.clean.normalize import BOILERPLATE_HINTS, may_have_boilerplate
from pipeline.clean.segment import Segments, doc_sums
from pipeline.hashing import poly_powers

_MARK, _CLOSER, _CLAUSE, _FINEWEB, _C4, _UNSP, _BULLET = (1 << i for i in range(7))


def _flag_table() -> np.ndarray:
    """uint8 [0x110000]: per code point the character sets the line rules test (bit flags)."""
    t = np.zeros(0x110000, np.uint8)
    sets = {
        _MARK: ".!?\u3002\uff01\uff1f",  # textstats._TERM's marks
        _CLOSER: "\"'\u201d\u2019)]\u300d\u300f",  # and closing quotes and brackets
        _CLAUSE: ",;\uff0c\uff1b",  # clause marks that end a sentence in unspaced text
        _FINEWEB: ".?!\"'\u201d\u2019\u3002\uff01\uff1f\u2026",  # textstats.FINEWEB_END
        _C4: '.?!"\u201d\u3002\uff01\uff1f',  # textstats.C4_END
        _BULLET: "\u2022-",
    }
    for bit, chars in sets.items():
        t[[ord(c) for c in chars]] |= bit
    for lo, hi in (  # textstats._UNSPACED_CHAR_RE
        (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3040, 0x30FF), (0x3100, 0x312F),
        (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
        (0xFF66, 0xFF9F), (0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF),
        (0x20000, 0x3FFFF),
    ):  # fmt: skip
        t[lo : hi + 1] |= _UNSP
    return t


_FLAGS = _flag_table()
_DOT, _ELLIPSIS, _COLON, _ZERO, _NINE = 0x2E, 0x2026, 0x3A, 0x30, 0x39
WRAP_MIN_LINES, WRAP_MIN_WIDTH, WRAP_MAX_WIDTH, WRAP_FULL = 3, 40, 100, 0.6  # as textstats


def _runs(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) int64 of the runs of consecutive positions in a sorted index array."""
    if not len(pos):
        return pos, pos
    brk = np.flatnonzero(np.diff(pos) != 1)
    return pos[np.append(0, brk + 1)], pos[np.append(brk, len(pos) - 1)] + 1


def _sentence_marks(
    cp: np.ndarray, cls: np.ndarray, flags: np.ndarray, clauses: bool = True
) -> tuple[np.ndarray, ...]:
    """(positions, counts if spaced, counts if unspaced) of the sentence ends textstats'
    _SENT_END_RE / _SENT_END_UNSPACED_RE find, by the position each match starts at.

    A run of marks then a run of closers matches once when whitespace or the end follows it
    (spaced), or unless one mark with no closer is followed by a digit (unspaced: regex
    backtracking keeps a shorter match otherwise). In unspaced text a clause mark also ends a
    sentence when the 4 characters before it are neither whitespace nor clause marks and no
    digit follows (clauses=False: no text is unspaced, the clause marks are left out)."""
    n = len(cp)
    fpos = np.flatnonzero(flags & (_MARK | _CLOSER | _CLAUSE))  # sparse: one pass over flags
    fval = flags[fpos]
    ms, me = _runs(fpos[(fval & _MARK) != 0])
    cs, ce = _runs(fpos[(fval & _CLOSER) != 0])
    r = me.copy()
    if len(cs):
        i = np.minimum(np.searchsorted(cs, me), len(cs) - 1)
        at = cs[i] == me  # a closer run right after the marks (it cannot start inside them)
        r[at] = ce[i[at]]
    rc = np.minimum(r, n - 1)
    nxt = np.where(r < n, cp[rc], 0)  # 0: the end of the text
    end_ok = (r >= n) | (cls[rc] == SPACE)
    digit_next = (nxt >= _ZERO) & (nxt <= _NINE) & (r < n)
    uns_ok = ~((me - ms == 1) & (r == me) & digit_next)
    kp = fpos[(fval & _CLAUSE) != 0] if clauses else np.zeros(0, np.int64)
    if len(kp):
        bad = np.zeros(n + 1, np.int32 if n < 1 << 31 else np.int64)
        np.cumsum((cls == SPACE) | ((flags & _CLAUSE) != 0), dtype=bad.dtype, out=bad[1:])
        behind = (kp >= 4) & (bad[kp] - bad[np.maximum(kp - 4, 0)] == 0)
        after = np.where(kp + 1 < n, cp[np.minimum(kp + 1, n - 1)], 0)
        kp = kp[behind & ~((after >= _ZERO) & (after <= _NINE) & (kp + 1 < n))]
    pos = np.concatenate((ms, kp))
    spaced = np.concatenate((end_ok, np.zeros(len(kp), bool)))
    unspaced = np.concatenate((uns_ok, np.ones(len(kp), bool)))
    return pos, spaced, unspaced


def _dups(get, lengths: np.ndarray, group: np.ndarray, d: int, h):
    """(repeats, their chars) int64 [d] each: items whose string get(i) was seen before in
    their group (the first copy not counted), as textstats.find_duplicates. Hash-equal items
    only are compared as strings."""
    dup = np.zeros(d, np.int64)
    dup_chars = np.zeros(d, np.int64)
    if len(lengths) < 2:
        return dup, dup_chars
    order = np.lexsort((h, group))
    hs, gs = h[order], group[order]
    same = (hs[1:] == hs[:-1]) & (gs[1:] == gs[:-1])
    if not same.any():
        return dup, dup_chars
    member = np.concatenate((same, [False])) | np.concatenate(([False], same))
    seen: set[tuple[int, str]] = set()
    for i in order[member].tolist():
        g = int(group[i])
        key = (g, get(i))
        if key in seen:
            dup[g] += 1
            dup_chars[g] += int(lengths[i])
        else:
            seen.add(key)
    return dup, dup_chars


def _span_getter(text: str, starts: np.ndarray, ends: np.ndarray):
    return lambda i: text[int(starts[i]) : int(ends[i])]


def line_stats_batch(
    seg: Segments,
    texts: list[str],
    out: np.ndarray,
    index: dict[str, int],
    dominant: np.ndarray,
    c4_args: tuple[int, int],
) -> np.ndarray:
    """Fill the line statistics (textstats._line_stats) of every document but those C4 must
    search line by line; returns bool [d]: True where done (False: use the per-document code)."""
    d, cp, text = seg.num_docs, seg.cp, seg.text
    n_chars = seg.doc_ends - seg.doc_starts
    n_tok = np.diff(seg.word_offsets)
    nl = np.flatnonzero(cp == 10)
    ls = np.concatenate(([0], nl + 1))  # raw lines, all documents in a row
    le = np.append(nl, len(cp))
    ldoc = np.searchsorted(seg.doc_starts, ls, side="right") - 1
    lfirst = np.searchsorted(ls, seg.doc_starts)
    raw_lines = np.diff(np.append(lfirst, len(ls)))
    # stripped bounds from the whitespace tokens (none crosses a newline): a line starts at its
    # first token and ends at its last one's end; tok[i] is line i's first token
    ts, te = seg.tokens()
    tok = np.searchsorted(ts, ls)
    ss = np.append(ts, len(cp))[tok]
    full = ss < le  # a non-empty (stripped) line
    se = np.append(te, len(cp))[np.maximum(np.searchsorted(te, le, side="right") - 1, 0)]
    se = np.where(full, se, ss)
    length = se - ss
    last = np.where(full, cp[np.maximum(se - 1, 0)], 0)
    lflag = _FLAGS[last]
    nxt_full = np.append(full[1:], False) & np.append(ldoc[1:] == ldoc[:-1], False)
    cont = full & nxt_full  # its paragraph goes on: the next raw line is not blank
    line_offsets = np.append(lfirst, len(ls))
    per_doc = lambda v: doc_sums(v, line_offsets)  # noqa: E731
    nlog = per_doc(full)
    if not full.any():
        return np.ones(d, bool)  # no line at all: no line statistic (as textstats)

    # logical lines (textstats.logical_lines): a label line is joined to the next line, and so
    # is a full line of a hard-wrapped document that goes on in its paragraph with no end mark
    label_cand = np.flatnonzero(cont & (last == _COLON) & (length <= 40))
    join = np.zeros(len(ls), bool)  # raw line i is joined (by one space) to raw line i + 1
    for i in label_cand.tolist():
        if text[ss[i] : se[i]].count(" ") < 4:
            join[i] = True
    fl = np.flatnonzero(full)
    key = np.sort((ldoc[fl].astype(np.int64) << 32) | length[fl])
    off = np.concatenate(([0], np.cumsum(nlog)[:-1]))
    width = key[np.minimum(off + (np.maximum(nlog, 1) - 1) * 9 // 10, len(key) - 1)] & 0xFFFFFFFF
    open_ = cont & ((lflag & _FINEWEB) == 0)
    wrapped = per_doc(open_ & (length >= WRAP_FULL * width[ldoc]))
    wrapped_doc = (
        (nlog >= WRAP_MIN_LINES)
        & (width >= WRAP_MIN_WIDTH)
        & (width <= WRAP_MAX_WIDTH)
        & (wrapped >= 2)
        & (2 * wrapped >= per_doc(open_))
    )
    join |= wrapped_doc[ldoc] & open_ & (length >= WRAP_FULL * width[ldoc])
    bullet = full & ((_FLAGS[cp[np.minimum(ss, len(cp) - 1)]] & _BULLET) != 0)
    join &= ~np.append(bullet[1:], False)  # (join implies cont: the next line is not blank)
    c4_check = _c4_check(seg, texts)
    done = ~c4_check | (nlog == 0)
    todo = done & (nlog > 0)
    R = np.flatnonzero(full & todo[ldoc])  # noqa: N806  the raw lines measured here
    if not len(R):
        return done
    # logical line j is raw lines R[g0[j]] .. R[g1[j]] (consecutive: a join has no blank line)
    lstart = np.ones(len(R), bool)
    lstart[1:] = ~join[R[:-1]] | (R[1:] != R[:-1] + 1)
    g0 = np.flatnonzero(lstart)
    g1 = np.append(g0[1:], len(R)) - 1
    L, La = R[g1], R[g0]  # noqa: N806  each logical line's last and first raw line
    D = ldoc[La]  # noqa: N806
    size = g1 - g0 + 1
    per = lambda v: np.bincount(D, weights=v, minlength=d).astype(np.int64)  # noqa: E731
    rows = np.flatnonzero(todo)
    nlog = np.bincount(D, minlength=d)  # logical lines per document
    nl_doc = nlog[rows]
    joins = np.bincount(D, weights=size - 1, minlength=d).astype(np.int64)
    llen = np.add.reduceat(length[R], g0) + (size - 1)  # one space per join

    def put(name: str, values: np.ndarray, where: np.ndarray | None = None) -> None:
        r = rows if where is None else rows[where]
        out[r, index[name]] = values if where is None else values[where]

    bullets = per(bullet[La])
    put("bullet_lines_frac", bullets[rows] / nl_doc)
    # v2: the text's last line may trail off ("..."): only earlier lines count as truncated
    e = se[L]
    dots = (length[L] >= 3) & (cp[e - 1] == _DOT) & (cp[np.maximum(e - 2, 0)] == _DOT)
    dots &= cp[np.maximum(e - 3, 0)] == _DOT
    ell = (dots | (cp[e - 1] == _ELLIPSIS)) & np.append(D[1:] == D[:-1], False)
    put("ellipsis_lines_frac", per(ell)[rows] / nl_doc)
    dup, dup_chars = _logical_dups(seg, ss, se, length, R, g0, size, La, L, llen, D)
    put("dup_lines_frac", dup[rows] / nl_doc)
    put("dup_line_chars_frac", dup_chars[rows] / n_chars[rows])
    body = n_chars - (raw_lines - 1)
    put(
        "fineweb_dup_line_chars_frac",
        np.where(body > 0, dup_chars / np.maximum(body, 1), 0.0)[rows],
    )
    _paragraphs(seg, ls, le, ss, se, full, ldoc, lfirst, raw_lines, todo, put, rows)
    punct = per((lflag[L] & _FINEWEB) != 0)[rows]
    put("line_punct_frac", np.where(nl_doc == 1, 1.0, punct / nl_doc))
    spaced_doc = ~np.isin(dominant[rows], UNSPACED)  # 30 chars of Chinese is a long line
    put("short_lines_frac", per(llen <= 30)[rows] / nl_doc, spaced_doc)
    newlines = raw_lines[rows] - 1 - joins[rows]
    put("newlines_per_word", newlines / np.maximum(n_tok[rows], 1), n_tok[rows] > 0)
    sentences = _c4_sentences(
        seg, tok, ls, ss, se, ldoc, lflag, (R, g0, L), D, nlog, dominant, c4_args
    )
    put("c4_sentences", sentences[rows])
    put("c4_lorem_ipsum", np.zeros(len(rows)))
    put("c4_curly_bracket", np.zeros(len(rows)))
    return done


def _paragraphs(seg, ls, le, ss, se, full, ldoc, lfirst, raw_lines, todo, put, rows) -> None:
    """Repeated paragraphs (textstats: `_PARA_SPLIT_RE.split(text.strip())`): runs of non-blank
    raw lines; the first starts and the last ends where text.strip() cuts."""
    d = seg.num_docs
    idx = np.arange(len(ls))
    first_line = idx == lfirst[ldoc]
    last_line = idx == (lfirst + raw_lines - 1)[ldoc]
    prev_full = np.concatenate(([False], full[:-1])) & ~first_line
    next_full = np.append(full[1:], False) & ~last_line
    ps_line = np.flatnonzero(full & ~prev_full & todo[ldoc])
    pe_line = np.flatnonzero(full & ~next_full & todo[ldoc])
    pdoc = ldoc[ps_line]
    first_para = np.concatenate(([True], pdoc[1:] != pdoc[:-1]))
    last_para = np.append(pdoc[1:] != pdoc[:-1], True)
    pa = np.where(first_para, ss[ps_line], ls[ps_line])
    pb = np.where(last_para, se[pe_line], le[pe_line])
    npara = np.bincount(pdoc, minlength=d)
    get = _span_getter(seg.text, pa, pb)
    pdup, pdup_chars = _dups(get, pb - pa, pdoc, d, seg.span_hashes(pa, pb))
    n_chars = seg.doc_ends - seg.doc_starts
    put("dup_paragraphs_frac", pdup[rows] / np.maximum(1, npara[rows]))
    put("dup_paragraph_chars_frac", pdup_chars[rows] / n_chars[rows])


def _logical_dups(seg, ss, se, length, R, g0, size, La, L, llen, D):  # noqa: N803
    """_dups over the logical lines: each one's hash is that of its raw lines joined by one
    space, hashing.span_hashes' polynomial (H(x + " " + y) = H(x) + 32 B^|x| + B^(|x|+1) H(y)),
    and its string is built only where hashes are equal."""
    d = seg.num_docs
    if (size == 1).all():
        return _dups(
            _span_getter(seg.text, ss[L], se[L]), llen, D, d, seg.span_hashes(ss[L], se[L])
        )
    pw = poly_powers(len(seg.cp))[0]
    step = length[R] + 1  # each raw line's offset in its logical line: the steps before it
    csum = np.cumsum(step)
    off = csum - step - np.repeat((csum - step)[g0], size)
    last = np.zeros(len(R), bool)
    last[np.append(g0[1:], len(R)) - 1] = True
    term = seg.span_hashes(ss[R], se[R]) * pw[off]
    term += np.where(last, 0, 32 * pw[off + length[R]]).astype(np.uint64)
    h = np.add.reduceat(term, g0)
    text = seg.text

    def get(j: int) -> str:
        a, b = int(g0[j]), int(g0[j] + size[j])
        return " ".join(text[int(ss[r]) : int(se[r])] for r in R[a:b].tolist())

    return _dups(get, llen, D, d, h)


def _c4_check(seg: Segments, texts: list[str]) -> np.ndarray:
    """bool [d]: texts holding `{`, "lorem ipsum" or a policy phrase (any case), which C4 must
    look for line by line: found in the batch's text (one lower(), C-speed finds), not per text.
    The phrases are ASCII, so they are looked for in the text's ASCII bytes, lower-cased, every
    other character one "?" (positions kept), as normalize._may_have_boilerplate_text does."""
    if seg.cp.dtype == np.uint8:  # an ASCII batch
        low: str | bytes = seg.text.lower()
        phrases: tuple = ("lorem ipsum", *BOILERPLATE_HINTS)
    elif "\u212a" in seg.text:  # KELVIN SIGN lower-cases to "k"
        return np.array(
            [
                "{" in t or "lorem ipsum" in t.lower() or may_have_boilerplate(t.lower())
                for t in texts
            ],
            bool,
        )
    else:
        low = seg.text.encode("ascii", "replace").lower()
        phrases = tuple(h.encode("ascii") for h in ("lorem ipsum", *BOILERPLATE_HINTS))
    hit = np.zeros(seg.num_docs, bool)
    starts, ends = seg.doc_starts.tolist(), seg.doc_ends.tolist()
    for hay, needles in ((seg.text, ("{",)), (low, phrases)):
        for needle in needles:
            i = hay.find(needle)
            while i != -1:
                k = bisect.bisect_right(starts, i) - 1  # no needle holds the joining "\n"
                hit[k] = True
                i = hay.find(needle, ends[k])
    return hit


def _c4_sentences(seg, tok, ls, ss, se, ldoc, lflag, logical, D, nlog, dominant, c4_args):  # noqa: N803
    """int64 [d]: C4's sentence count over the lines it keeps (textstats._c4_stats, for texts
    with no lorem ipsum, `{` or policy phrase to look for). tok[i]: line i's first token.
    logical = (R, g0, L): logical line j is raw lines R[g0[j]:g0[j+1]], the last one L[j]."""
    d, cp, cls = seg.num_docs, seg.cp, seg.cls
    R, g0, L = logical  # noqa: N806
    agg = lambda v: np.add.reduceat(v, g0)  # noqa: E731  per raw line -> per logical line
    min_words, max_word = c4_args
    flags = _FLAGS[:128][cp] if cp.dtype == np.uint8 else _FLAGS[cp]
    s, e = ss[L], se[L]  # the last raw line: a joined line ends as it does
    dots = (e - s >= 3) & (cp[e - 1] == _DOT) & (cp[np.maximum(e - 2, 0)] == _DOT)
    dots &= cp[np.maximum(e - 3, 0)] == _DOT
    ended = ((lflag[L] & _C4) != 0) & ~dots
    consider = ended | (nlog[D] == 1)  # one paragraph: its end is a sentence end (v2)
    ts, te = seg.tokens()  # whitespace tokens (str.split): line i's are [tok[i], tok[i + 1])
    tok_off = np.append(tok, len(ts))
    words = agg(np.diff(tok_off)[R])
    # unspaced letters (sparse: a few documents) count one word each, as textstats does
    upos = np.flatnonzero(flags & _UNSP) if cp.dtype != np.uint8 else ()
    if len(upos):
        before = lambda x: np.searchsorted(upos, x)  # noqa: E731  unspaced letters before x
        doc_unsp = (before(seg.doc_ends) - before(seg.doc_starts)) > 0
        ti = np.flatnonzero(doc_unsp[seg.token_doc()])
        has = np.zeros(len(ts), bool)
        has[ti] = before(te[ti]) > before(ts[ti])
        extra = agg((before(se[R]) - before(ss[R])) - doc_sums(has, tok_off)[R])
        words = words + np.where(doc_unsp[D], extra, 0)
    keep = consider & (words >= min_words)
    long_doc = (seg.doc_ends - seg.doc_starts) > max_word
    if long_doc.any() and len(ts):
        # longest token of each line; every line in L has a token (reduceat: one pass)
        longest = np.maximum.reduceat(np.append(te - ts, 0), tok)[R]  # 0: a sentinel
        longest = np.maximum.reduceat(longest, g0)
        keep &= ~(long_doc[D] & (longest > max_word))
    clauses_doc = np.isin(dominant, UNSPACED)
    pos, spaced, unspaced = _sentence_marks(cp, cls, flags, bool(clauses_doc.any()))
    mline = np.searchsorted(ls, pos, side="right") - 1
    clauses = clauses_doc[ldoc[np.minimum(mline, len(ldoc) - 1)]]
    hit = np.where(clauses, unspaced, spaced)
    per_line = agg(np.bincount(mline[hit], minlength=len(ls))[R])
    counted = per_line + ~ended
    return np.bincount(D[keep], weights=counted[keep], minlength=d).astype(np.int64)

"""dedup.minhash: signatures vs datasketch, the simplify rule, word and shingle hashes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.dedup import minhash
from pipeline.dedup.minhash import estimate_jaccard, minhash_texts, simplify
from pipeline.permute import mix64


def test_signature_is_independent_of_batch_and_order():
    texts = [
        f"doc {i} " + " ".join(["word"] * i) + " end of story number " + str(i * 7)
        for i in range(30)
    ]
    whole = minhash_texts(texts, 64, 3, seed=5)
    parts = np.concatenate(
        [minhash_texts(texts[i : i + 7], 64, 3, seed=5) for i in range(0, 30, 7)]
    )
    assert np.array_equal(whole, parts)
    assert np.array_equal(minhash_texts(texts[::-1], 64, 3, seed=5), whole[::-1])
    assert not np.array_equal(minhash_texts(texts, 64, 3, seed=6), whole)


def test_non_ascii_punctuation_space_and_emoji():
    """NBSP and ideographic space split words; em dash and emoji (astral, \\p{So}) are deleted."""
    text = "Caf\u00e9\u00a0au\u3000lait\u2014tr\u00e8s bon \U0001f600!"
    assert simplify(text) == "caf\u00e9 au laittr\u00e8s bon"
    sig = minhash_texts([text, "caf\u00e9 au laittr\u00e8s bon"], 32, 2, 1)
    assert np.array_equal(sig[0], sig[1])


def test_simplify_rule():
    assert (
        simplify("  Hello,   WORLD!\n\tIt's—fine… ") == "hello world itsfine"
    )  # deleted, not split
    sig = minhash_texts(["  Hello,   WORLD!\n\tIt's—fine… ", "hello world itsfine"], 32, 2, 1)
    assert np.array_equal(sig[0], sig[1])


def _shingles(text: str, n: int) -> set[str]:
    w = simplify(text).split()
    return {" ".join(w[i : i + n]) for i in range(max(1, len(w) - n + 1))}


def test_jaccard_estimates_agree_with_datasketch():
    """On 60 pairs with true Jaccard spread over ~0.2-1, our estimate and datasketch's (same
    shingles, num_perm 256) each stay within 4 sigma of the truth, sigma = sqrt(J(1-J)/256), and
    the two agree with each other on average to within 0.01."""
    datasketch = pytest.importorskip("datasketch")
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(3000)]
    num_perm, n = 256, 3
    ours, theirs, truth = [], [], []
    for k in range(60):
        base = [vocab[i] for i in rng.integers(len(vocab), size=200)]
        other = list(base)
        for j in rng.integers(len(other), size=int(k % 20) * 2):
            other[j] = vocab[int(rng.integers(len(vocab)))]
        a, b = " ".join(base), " ".join(other)
        sa, sb = _shingles(a, n), _shingles(b, n)
        truth.append(len(sa & sb) / len(sa | sb))
        sig = minhash_texts([a, b], num_perm, n, seed=k)
        ours.append(float(estimate_jaccard(sig[:1], sig[1:])[0]))
        ma, mb = datasketch.MinHash(num_perm, seed=k), datasketch.MinHash(num_perm, seed=k)
        ma.update_batch([s.encode() for s in sa])
        mb.update_batch([s.encode() for s in sb])
        theirs.append(ma.jaccard(mb))
    truth_a, ours_a, theirs_a = map(np.array, (truth, ours, theirs))
    sigma = np.sqrt(np.maximum(truth_a * (1 - truth_a), 0.01) / num_perm)
    assert truth_a.min() < 0.4 and truth_a.max() == 1.0
    assert (np.abs(ours_a - truth_a) <= 4 * sigma).all()
    assert (np.abs(theirs_a - truth_a) <= 4 * sigma).all()
    assert abs((ours_a - truth_a).mean() - (theirs_a - truth_a).mean()) < 0.01


def test_long_documents_use_sub_blocks_with_the_same_result(monkeypatch):
    """A document with more shingles than one permutation block takes a running-min path."""
    from pipeline.dedup import minhash

    texts = [" ".join(f"w{i % 997}x{i}" for i in range(3000)), "a short one here", "b c d e f g"]
    want = minhash_texts(texts, 64, 5, seed=2)
    monkeypatch.setattr(minhash, "_CHUNK_CELLS", 64 * 100)  # blocks of 100 shingles
    assert np.array_equal(minhash_texts(texts, 64, 5, seed=2), want)


def _reference_words(text: str) -> list[bytes]:
    """The rule, slowly: NUL is a space, punctuation/symbols deleted, lowercased, split."""
    simple = minhash._PUNCT.sub("", text.replace("\x00", " ")).lower()
    return [w.encode("utf-8", "surrogatepass") for w in simple.split()]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet="aZ9 .,!'\t\n\x00\x1c\u00e9\u00c9\u03a3\u0130\u00df\u2014\u3000"
            "\u00a0\u2019\u4e2d\U0001f600\U00010400x",
            max_size=40,
        ),
        min_size=1,
        max_size=6,
    )
)
@example(
    ["\u0130STANBUL \u039f\u0394\u039f\u03a3, \U00010400X \u00c9t\u00c9", "Plain ASCII, Text!"]
)
def test_simplified_bytes_follow_the_rule(texts):
    """ASCII texts (bytes.translate) and the others (UTF-32 lookup; İ and Σ via str.lower) give
    the same words as the rule applied per text, at the returned document offsets."""
    data, bounds = minhash._simplified_bytes(texts)
    for i, text in enumerate(texts):
        assert data[bounds[i] : bounds[i + 1] - 1].split() == _reference_words(text)


def test_word_hashes_are_a_function_of_the_word():
    """Words of 1-40 bytes, and words differing in one byte at each position (chunk edges 8, 16,
    24 included): equal words hash equal wherever they stand, different words differently."""
    rng = np.random.default_rng(0)
    base = "".join(chr(97 + i) for i in rng.integers(26, size=40))
    vocab = [base[:n] for n in range(1, 41)]
    vocab += [base[:p] + "z" + base[p + 1 : 30] for p in range(30)]
    vocab += ["\u00e9t\u00e9" * k for k in range(1, 8)]  # multi-byte UTF-8 across chunk edges
    docs = [" ".join(vocab[i] for i in rng.integers(len(vocab), size=50)) for _ in range(8)]
    keys, _, _ = minhash._tables(3, 8, 1)
    hashes, counts = minhash.word_hashes(docs, keys)
    words = [w for d in docs for w in d.split()]
    assert counts.tolist() == [50] * 8 and len(hashes) == len(words)
    seen: dict[str, int] = {}
    for w, h in zip(words, hashes.tolist(), strict=True):
        assert seen.setdefault(w, h) == h
    assert len(set(seen.values())) == len(seen)
    alone, _ = minhash.word_hashes(list(seen), keys)
    assert alone.tolist() == list(seen.values())


def test_shingle_hashes_match_the_formula():
    """mix64(sum_k word[j+k] * mult[k]) per window inside a document; a short document (k < n
    words) gets one shingle of its k words; none for a document without words."""
    words = np.arange(1, 10, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    counts = np.array([4, 0, 2, 3])
    mult = np.array([3, 5, 7], np.uint64)
    got, per_doc = minhash.shingle_hashes(words, counts, mult)

    def sh(ws):
        acc = sum(int(w) * int(m) for w, m in zip(ws, mult, strict=False)) % 2**64
        return int(mix64(np.array([acc], np.uint64))[0])

    w = words.tolist()
    want = [sh(w[0:3]), sh(w[1:4]), sh(w[4:6]), sh(w[6:9])]
    assert per_doc.tolist() == [2, 0, 1, 1] and got.tolist() == want

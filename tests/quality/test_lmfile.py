"""quality.lmfile: the fitted scorer as a deterministic .npz, loaded without pickle."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.errors import DataError
from pipeline.quality.lmfile import load_scorer, scorer_bytes
from pipeline.quality.lmscore import LMParams, fit_classifiers, fit_lm
from synth_text import docs


@pytest.mark.parametrize("folds", ["doc", "sentence"])
def test_scorer_file_round_trip(tmp_path, folds):
    texts = docs(40, 6)
    texts.append(docs(1, 8)[0] + " " + texts[3].split(". ")[2] + ".")  # shares a sentence
    scorer, ref = fit_lm(texts, np.arange(41), LMParams(min_reference_docs=10, folds=folds))
    assert (scorer.router is None) == (folds == "doc")
    fit_classifiers(scorer, ref, None)
    path = tmp_path / "lm.npz"
    path.write_bytes(scorer_bytes(scorer))
    assert scorer_bytes(scorer) == path.read_bytes()  # deterministic bytes
    loaded = load_scorer(path)
    probe, rows = docs(4, 7) + [texts[3]], np.array([0, 1, 2, 3, 3])  # + a reference copy
    np.testing.assert_array_equal(loaded.features(probe, rows)[0], scorer.features(probe, rows)[0])
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"junk")
    with pytest.raises(DataError, match="not a quality LM file"):
        load_scorer(bad)

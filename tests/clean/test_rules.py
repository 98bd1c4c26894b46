"""clean.rules: first/all/alone attribution, a null threshold turns its rule off."""

from __future__ import annotations

import numpy as np

from pipeline.clean.rules import RULE_NAMES, attribution, evaluate
from pipeline.clean.textstats import filter_stats
from pipeline.stages.clean import CleanConfig


def test_attribution_first_all_alone():
    """Doc 0 fails rules 1 and 2 (first=1); doc 1 fails only 2 (alone); doc 2 passes."""
    fails = np.zeros((3, len(RULE_NAMES)), bool)
    fails[0, [1, 2]] = True
    fails[1, 2] = True
    att = attribution(fails)
    assert att["first"][1] == 1 and att["first"][2] == 1 and att["first"].sum() == 2
    assert att["all"][2] == 2 and att["all"][1] == 1
    assert att["alone"][2] == 1 and att["alone"][1] == 0


def test_null_threshold_turns_a_rule_off():
    short = "Just a short sentence with the words of a tiny document."
    on = evaluate(np.array([filter_stats(short)]), CleanConfig())
    off = evaluate(np.array([filter_stats(short)]), CleanConfig(min_words=None))
    j = RULE_NAMES.index("gopher_min_words_v1")
    assert on[0, j] and not off[0, j]

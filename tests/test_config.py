"""pipeline.config: typed conversion, ranges, unknown keys, config_hash, and recipe keys."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import pytest

from pipeline.config import (
    RunConfig,
    bounded,
    build_config,
    config_hash,
    recipe_key,
    setting,
    with_keys,
)
from pipeline.errors import RecipeError
from pipeline.stages import STAGES
from pipeline.stages.clean import CleanConfig


@dataclass(frozen=True)
class Example:
    size: int = bounded(4, ge=1)  # a count
    share: float | None = bounded(None, gt=0.0, le=1.0)  # a fraction
    kind: Literal["a", "b"] = "a"  # a choice


def test_build_config_converts_and_checks_every_key():
    cfg = build_config(Example, {"size": 2.0, "share": 1, "kind": "b"}, "ex")
    assert cfg == Example(2, 1.0, "b") and isinstance(cfg.size, int)
    with pytest.raises(RecipeError, match=r"ex\.size: must be in \[1, inf\), got 0"):
        build_config(Example, {"size": 0}, "ex")
    with pytest.raises(RecipeError, match=r"ex\.share: must be in \(0\.0, 1\.0\]"):
        build_config(Example, {"share": 0.0}, "ex")
    with pytest.raises(RecipeError, match=r"ex\.sise: unknown key \(did you mean 'size'\?\)"):
        build_config(Example, {"sise": 3}, "ex")
    with pytest.raises(RecipeError, match=r"ex\.kind: got 'c', expected one of 'a', 'b'"):
        build_config(Example, {"kind": "c"}, "ex")


def test_config_hash_follows_values_only():
    assert config_hash(Example()) == config_hash(build_config(Example, {"size": 4}, "ex"))
    assert config_hash(Example()) != config_hash(Example(size=5))
    assert len(config_hash(Example())) == 64


def test_recipe_key_and_setting_come_from_the_dataclasses():
    cfg = CleanConfig(min_words=7)
    assert recipe_key(cfg, "min_words") == recipe_key(CleanConfig, "min_words") == "clean.min_words"
    assert recipe_key(RunConfig, "seed") == "seed"
    assert setting(cfg, "min_words", "threshold") == {
        "threshold": 7,
        "threshold_key": "clean.min_words",
    }
    for name, stage in STAGES.items():  # every stage's section is its recipe block's name
        field = dataclasses.fields(stage.config_cls)[0].name
        assert recipe_key(stage.config_cls, field) == f"{name}.{field}"


def test_with_keys_puts_each_key_right_after_its_stat():
    cfg = CleanConfig()
    got = with_keys({"a": 1, "words": 50, "b": 2}, cfg, {"words": "min_words"})
    assert list(got.items()) == [
        ("a", 1),
        ("words", 50),
        ("words_key", "clean.min_words"),
        ("b", 2),
    ]

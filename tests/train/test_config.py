"""The `pretrain:` recipe block is validated like a data recipe: one RecipeError line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import RecipeError
from pipeline.train.config import PretrainConfig, build_pretrain, load_pretrain_config

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.mark.parametrize("name", ["pretrain_demo.yaml", "pretrain_tinystories.yaml"])
def test_shipped_recipes_load(name):
    cfg = load_pretrain_config(RECIPES / name)
    assert isinstance(cfg, PretrainConfig) and cfg.d_model % cfg.n_head == 0


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"pretrain": {"n_layers": 2}}, r"pretrain.n_layers: unknown key \(did you mean 'n_layer'"),
        ({"pretrain": {"lr": "fast"}}, r"pretrain.lr: got 'fast', expected a number"),
        ({"pretrain": {"batch_size": 0}}, r"pretrain.batch_size: must be in \[1, inf\), got 0"),
        ({"pretrain": {"dropout": 1.0}}, r"pretrain.dropout: must be in \[0.0, 1.0\)"),
        ({"pretrain": {"device": "gpu"}}, r"pretrain.device: got 'gpu', expected one of"),
        ({"pretrain": {"d_model": 30, "n_head": 4}}, r"pretrain.n_head: d_model 30 must divide"),
        ({"pretrain": {"max_steps": None}}, r"pretrain.max_steps: set max_steps or max_tokens"),
        ({"pretrain": {"eval_texts": ["a.csv"]}}, r"pretrain.eval_texts\[0\]: expected a .jsonl"),
        ({"pretrain": {"lr": 1e-3, "min_lr": 1e-2}}, r"pretrain.min_lr: must be <= lr"),
        ({"pretrian": {}}, r"pretrian: unknown key .*did you mean 'pretrain'"),
        ({}, r"pretrain: missing"),
    ],
)
def test_bad_keys_are_one_line(raw, match):
    with pytest.raises(RecipeError, match=match) as info:
        build_pretrain(raw)
    assert "\n" not in str(info.value)


def test_budget_in_steps_or_tokens():
    cfg = build_pretrain({"pretrain": {"batch_size": 2, "grad_accum": 3, "max_steps": 7}})
    assert cfg.tokens_per_step(seq_len=100, world_size=2) == 1200
    assert cfg.total_steps(seq_len=100, world_size=2) == 7
    cfg = build_pretrain({"pretrain": {"batch_size": 2, "max_tokens": 1001}})
    assert cfg.total_steps(seq_len=100) == 6  # 1001 / 200 rounded up


def test_set_overrides(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("pretrain:\n  max_steps: 5\n")
    cfg = load_pretrain_config(path, ["pretrain.max_steps=9", "pretrain.device=cpu"])
    assert (cfg.max_steps, cfg.device) == (9, "cpu")


def test_a_pretrain_recipe_given_to_pipeline_data_says_which_command():
    from pipeline.recipe import load_recipe

    with pytest.raises(RecipeError, match="pretrain: a pretrain recipe: run it with `pipeline pre"):
        load_recipe(RECIPES / "pretrain_demo.yaml")

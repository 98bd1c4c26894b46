"""The Ray executor: the demo recipe's bytes equal the local executor's; retries and dead workers.

One local Ray (2 CPUs) per module; every test skips cleanly where Ray cannot start.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

import pytest

from pipeline.config import ExecutorConfig
from pipeline.errors import DataError, PipelineError
from pipeline.recipe import load_recipe
from pipeline.run.runner import run_recipe
from ray_tasks import _die_once, _flaky, check_bind

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # no shared memory, sandboxed ports, ...: not this code's failure
        pytest.skip(f"cannot start a local Ray: {exc}")
    # the executor passes the driver's PYTHONPATH on: workers then import this module's helpers
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent), old) if p)
    yield ray
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH")
    else:
        os.environ["PYTHONPATH"] = old


def _executor(**kw):
    from pipeline.run.ray import RayExecutor

    return RayExecutor(ExecutorConfig(kind="ray", **kw))


def _manifest_shas(run_dir: Path) -> dict[str, list[str]]:
    m = json.loads((run_dir / "manifest.json").read_text())["stages"]
    return {n: [(o["path"], o["sha256"]) for o in e["outputs"]] for n, e in m.items()}


def test_demo_recipe_on_ray_is_byte_identical_to_local(tmp_path, ray_cluster):
    recipe = ROOT / "recipes" / "data_demo.yaml"
    base = ["download.max_docs=200", "tokenize.vocab_size=600"]
    local = load_recipe(recipe, [*base, f"out_dir={tmp_path / 'local'}", "workers=1"])
    on_ray = load_recipe(recipe, [*base, f"out_dir={tmp_path / 'ray'}", "executor.kind=ray"])
    run_recipe(local, progress=False)
    run_recipe(on_ray, progress=False)
    want, got = _manifest_shas(tmp_path / "local"), _manifest_shas(tmp_path / "ray")
    assert list(got) == list(on_ray.stages) and got == want


def test_demo_on_ray_with_a_url_run_folder_is_byte_identical(tmp_path, ray_cluster, monkeypatch):
    """Each Ray worker process plays a node of its own (its own working copy, synced only
    through the URL): the demo recipe's bytes still equal the local executor's."""
    from pipeline.run.remote import PER_PROCESS_ENV

    monkeypatch.setenv(PER_PROCESS_ENV, "1")
    recipe = ROOT / "recipes" / "data_demo.yaml"
    base = ["download.max_docs=200", "tokenize.vocab_size=600"]
    local = load_recipe(recipe, [*base, f"out_dir={tmp_path / 'local'}", "workers=1"])
    url = f"out_dir=file://{tmp_path / 'ray'}"
    run_recipe(local, progress=False)
    run_recipe(load_recipe(recipe, [*base, url, "executor.kind=ray"]), progress=False)
    assert _manifest_shas(tmp_path / "ray") == _manifest_shas(tmp_path / "local")
    assert not list(Path(tempfile.gettempdir()).glob("pipeline-node-*"))  # nodes' copies gone


def test_dead_worker_is_retried_and_results_keep_order(tmp_path, ray_cluster):
    with _executor(max_retries=2) as ex:
        got = ex.map(functools.partial(_die_once, str(tmp_path)), list(range(6)), desc="t")
    assert got == [x * x for x in range(6)]
    assert (tmp_path / "died-1").exists()  # a worker did die


def test_dead_worker_without_retries_fails_clearly(tmp_path, ray_cluster):
    with _executor(max_retries=0) as ex, pytest.raises(PipelineError, match="max_retries: 0"):
        ex.map(functools.partial(_die_once, str(tmp_path)), [0, 1, 2], desc="t")


def test_oserror_is_retried_bad_data_is_not(tmp_path, ray_cluster):
    with _executor(max_retries=1) as ex:
        assert ex.map(functools.partial(_flaky, str(tmp_path), "os"), [1, 2]) == [1, 2]
    assert (tmp_path / "attempt-1").read_text() == "2"
    (tmp_path / "d").mkdir()
    with _executor(max_retries=3) as ex, pytest.raises(DataError, match="bad row"):
        ex.map(functools.partial(_flaky, str(tmp_path / "d"), "data"), [5])
    assert (tmp_path / "d" / "attempt-5").read_text() == "1"  # a bug fails at once


def test_workers_see_the_run_folder(tmp_path, ray_cluster):
    with _executor() as ex:
        ex.check_shared(tmp_path)  # one node: visible; the probe file is removed again
    assert list(tmp_path.iterdir()) == []


def test_ray_executor_binds_ledger_and_sync_and_removes_the_nodes_copies(ray_cluster):
    """bind(ledger, sync) as the local executor; a sync's token names the nodes' copies of a URL
    run folder, which close() removes on every node."""
    token = "bindtest0123"
    copy = Path(tempfile.gettempdir()) / f"pipeline-node-{token}"
    copy.mkdir(exist_ok=True)
    with _executor() as ex:
        check_bind(ex, token)
        assert copy.is_dir()
    assert not copy.exists()


def test_line_dedup_and_decontaminate_on_ray_match_local(tmp_path, ray_cluster, monkeypatch):
    """The two web filters' tasks (work files per part and per hash partition, eval n-gram
    files written by the driver) give the local bytes on Ray with a URL run folder where each
    worker process is a node of its own."""
    from pydoc_data.topics import topics

    from pipeline.run.remote import PER_PROCESS_ENV
    from pipeline.stages import line_dedup

    monkeypatch.setenv(PER_PROCESS_ENV, "1")
    monkeypatch.setattr(line_dedup, "SMALL_TEXT_BYTES", 0)  # the work-file path, not in-memory
    (tmp_path / "eval.txt").write_text(topics["assert"], encoding="utf-8")
    recipe = tmp_path / "web.yaml"
    recipe.write_text(
        "seed: 5\ndownload: {source: python_docs, max_docs: 150, docs_per_part: 40}\n"
        "line_dedup: {}\n"
        f"decontaminate: {{eval_texts: [{tmp_path / 'eval.txt'}], mode: drop}}\n",
        encoding="utf-8",
    )
    local = load_recipe(recipe, [f"out_dir={tmp_path / 'local'}", "workers=1"])
    run_recipe(local, progress=False)
    url = f"out_dir=file://{tmp_path / 'ray'}"
    run_recipe(load_recipe(recipe, [url, "executor.kind=ray"]), progress=False)
    want = _manifest_shas(tmp_path / "local")
    assert _manifest_shas(tmp_path / "ray") == want
    report = json.loads((tmp_path / "local" / "pipeline_report.json").read_text())["stages"]
    assert report[1]["stage"] == "line_dedup" and report[1]["stats"]["lines_removed"] > 0
    assert any("/rejected/" in p for p, _ in want["decontaminate"])


def test_mix_url_lists_and_dedup_on_ray_are_byte_identical_to_local(tmp_path, ray_cluster):
    """download.sources (× 2 and × 0.5), clean's domain list and dedup of the copies: the same
    bytes on Ray as on one local worker."""
    from helpers import make_recipe
    from synth_text import docs

    for name, seed in (("wiki", 1), ("web", 2)):
        rows = [
            {"id": str(i), "text": t, "url": f"https://{'spam' if i % 4 == 0 else name}.com/{i}"}
            for i, t in enumerate(docs(12, seed=seed, sentences=8))
        ]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "domains.txt").write_text("spam.com\n")
    sources = [
        {"source": "jsonl", "path": str(tmp_path / "wiki.jsonl"), "url_field": "url", "weight": 2},
        {"source": "jsonl", "path": str(tmp_path / "web.jsonl"), "url_field": "url", "weight": 0.5},
    ]
    stages = {
        "download": {"sources": sources, "docs_per_part": 8},
        "clean": {
            "domain_blocklist": str(tmp_path / "domains.txt"),
            "min_words": 5,
            "min_stop_words": None,
        },
        "dedup": {},
    }
    run_recipe(make_recipe(tmp_path / "local", stages), progress=False)
    run_recipe(make_recipe(tmp_path / "ray", stages, executor={"kind": "ray"}), progress=False)
    want, got = _manifest_shas(tmp_path / "local"), _manifest_shas(tmp_path / "ray")
    assert list(got) == ["download", "clean", "dedup"] and got == want

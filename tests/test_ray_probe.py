"""A Ray run killed during its node probe left `.ray-probe-<hex>` in the run folder for good: the
sweep did not know the name (issue 28, defect 11). The probe is now a `.tmp` dot file, and the
sweep also removes probes of the old name."""

from __future__ import annotations

from helpers import run_stages
from pipeline.run.ray import probe_path


def test_a_killed_probe_is_swept_by_the_next_run(tmp_path):
    run = tmp_path / "run"
    stages = {"download": {"source": "toy", "max_docs": 20}}
    run_stages(run, stages)
    probe = probe_path(run)  # what check_shared writes, left by a kill before its unlink
    assert probe.parent == run and probe.name.startswith(".ray-probe-")
    probe.write_text("probe")
    legacy = run / ".ray-probe-0123456789abcdef0123456789abcdef"  # the name before the fix
    legacy.write_text("probe")
    keep = run / ".ray-probe-notes"  # a folder of that name is not a probe: left alone
    keep.mkdir()
    run_stages(run, stages)  # up to date: nothing runs, but the sweep does
    assert not probe.exists() and not legacy.exists()
    assert keep.is_dir()

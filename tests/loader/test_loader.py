"""TokenLoader: torch DataLoader with workers and prefetch; its state is that of the last batch
handed out, so a killed run resumes (also on another world size) exactly (docs/loader.md, 5)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from loader.conftest import ids_of, sample_rows, write_shards
from pipeline.loader import GlobalSampler, ShardedTokenDataset, TokenLoader

torch = pytest.importorskip("torch")

N, SIZES = 90, [25, 25, 25, 15]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return ShardedTokenDataset(write_shards(tmp_path_factory.mktemp("l") / "train", SIZES))


def loaders(ds, p, b, workers, **kw):
    return [
        TokenLoader(ds, GlobalSampler(ds, b, world_size=p, rank=r, **kw), num_workers=workers)
        for r in range(p)
    ]


def global_steps(rank_loaders, stop=None, epoch=None):
    """Per step, the global sequence of sample ids (rank r's k-th sample at offset r + kP), and
    the states of all ranks after the last delivered step."""
    if epoch is not None:
        for lo in rank_loaders:
            lo.set_epoch(epoch)
    p, steps = len(rank_loaders), []
    iters = [iter(lo) for lo in rank_loaders]
    while stop is None or len(steps) < stop:
        try:
            batches = [next(it) for it in iters]
        except StopIteration:
            break
        seq = np.empty(p * len(batches[0]["input_ids"]), np.int64)
        for r, batch in enumerate(batches):
            seq[r::p] = ids_of(batch)
        steps.append(seq.tolist())
    del iters  # the "kill": workers and everything they prefetched are dropped
    return steps, [lo.state_dict() for lo in rank_loaders]


def test_batches_are_tensors_gathered_with_get_batch(ds):
    (lo,) = loaders(ds, 1, 8, workers=2, order="sequential")
    batch = next(iter(lo))
    assert set(batch) == {"input_ids", "segment_ids"}
    assert batch["input_ids"].dtype == torch.int64 and batch["input_ids"].shape == (8, 8)
    want = sample_rows(0, 8, 8)
    np.testing.assert_array_equal(batch["segment_ids"].numpy(), want["segment_ids"])
    np.testing.assert_array_equal(batch["input_ids"].numpy(), want["input_ids"])
    plain = TokenLoader(ds, GlobalSampler(ds, 4), num_workers=0, as_torch=False)
    first = next(iter(plain))
    assert isinstance(first["input_ids"], np.ndarray) and first["input_ids"].dtype == np.uint16
    assert len(plain) == 23  # ceil(90 / 4) steps


def test_state_is_the_last_delivered_batch_not_the_prefetched_ones(ds):
    (lo,) = loaders(ds, 1, 4, workers=2, seed=3)
    it = iter(lo)
    for _ in range(3):
        next(it)
    assert lo.sampler.cursor > 12  # the workers prefetched ahead ...
    assert lo.state_dict()["cursor"] == 12  # ... the state did not
    del it
    rest = [ids_of(b) for b in lo]  # a new pass continues after the delivered batches
    full = [ids_of(b) for b in loaders(ds, 1, 4, workers=0, seed=3)[0]]
    assert rest == full[3:]


@pytest.mark.parametrize("p2, b2, workers2", [(2, 4, 2), (1, 8, 2), (4, 2, 0), (3, 3, 1)])
def test_kill_and_resume_equals_uninterrupted(ds, p2, b2, workers2):
    """Run 2 ranks x B=4 with 2 workers and prefetch, kill after 5 steps, checkpoint through
    JSON, resume on P' ranks with batch size B': the global sample order continues exactly."""
    full, _ = global_steps(loaders(ds, 2, 4, workers=0, seed=11), epoch=2)
    before, states = global_steps(loaders(ds, 2, 4, workers=2, seed=11), stop=5, epoch=2)
    assert before == full[:5] and states[0] == states[1] and states[0]["cursor"] == 40
    state = json.loads(json.dumps(states[0]))
    resumed = loaders(ds, p2, b2, workers=workers2)  # default seed: the state's wins
    for lo in resumed:
        lo.load_state_dict(state)
    after, end = global_steps(resumed, epoch=2)  # the usual loop calls set_epoch again
    flat = lambda steps: [g for s in steps for g in s]  # noqa: E731
    pad = end[0]["padded"]
    got = flat(before) + flat(after)
    assert got[: len(got) - pad] == flat(full)[:N] and len(got) - pad == N
    assert sorted(got[:N]) == list(range(N))
    if p2 * b2 == 8:  # same global batch: the very same global steps (the last one's padding
        assert after[:-1] == full[5:-1]  # depends on P: the tail is padded to a multiple of it)
        assert after[-1][: N % 8] == full[-1][: N % 8]


def test_second_epoch_after_set_epoch_and_len(ds):
    (lo,) = loaders(ds, 1, 16, workers=2, seed=1, drop_last=True)
    assert len(lo) == 5
    e0 = [ids_of(b) for b in lo]
    lo.set_epoch(1)
    assert lo.state_dict()["cursor"] == 0 and lo.state_dict()["epoch"] == 1
    e1 = [ids_of(b) for b in lo]
    assert len(e0) == len(e1) == 5 and e0 != e1
    assert sorted(sum(e1, [])) == sorted(set(sum(e1, [])))


def test_numpy_core_imports_without_torch():
    import subprocess
    from pathlib import Path

    import pipeline

    code = (
        "import sys, pipeline.loader as L; assert 'torch' not in sys.modules; "
        "L.GlobalSampler(10, 2); L.make_doc_mask([1, 1]); assert 'torch' not in sys.modules"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env={"PYTHONPATH": str(Path(pipeline.__file__).parents[1])},
    )


def test_loader_rejects_a_sampler_for_another_dataset(ds):
    with pytest.raises(ValueError, match="sampler is for 91 samples, the dataset has 90"):
        TokenLoader(ds, GlobalSampler(91, 4))


def test_train_loop_example_resumes_exactly_on_another_world_size(tmp_path, capsys):
    """examples/train_loop.py, small: 2 ranks, stop at step 11, resume on 1 rank across the
    epoch boundary (100 samples / global batch 8 = 12 steps an epoch with drop_last)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / "train_loop.py"
    spec = importlib.util.spec_from_file_location("train_loop", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    shards = write_shards(tmp_path / "train", [30, 30, 30, 10], seq_len=16)
    args = ["--steps", "14", "--stop-at", "11", "--world-size", "2", "--resume-world-size", "1"]
    args += ["--workers", "1", "--vocab", "256", "--ckpt", str(tmp_path / "ck.pt")]
    threads = torch.get_num_threads()
    try:
        out = example.main([str(shards), *args])
    finally:
        torch.set_num_threads(threads)
    assert out["same"] and len(out["resumed"]) == 14
    prints = [f for _, f, _ in out["full"]]
    assert len(set(prints)) == 14  # every step a different batch: the equality means something
    assert out["full"][-1][2] < out["full"][0][2]  # it trains
    assert "resumed == uninterrupted: True" in capsys.readouterr().out


def test_a_pass_leaves_torch_global_rng_alone(ds):
    """Each DataLoader pass draws its workers' base seed; from a private generator, so a pass
    started by a prefetch thread cannot race the training step (dropout) for torch's global
    RNG: the draw after a pass equals the draw with no pass at all."""
    torch.manual_seed(7)
    want = torch.rand(4)
    torch.manual_seed(7)
    (lo,) = loaders(ds, 1, 8, 0)
    for _ in zip(range(3), lo, strict=False):
        pass
    assert torch.equal(torch.rand(4), want)

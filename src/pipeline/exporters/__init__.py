"""The token shards as the files other trainers read, with no conversion script of their own:
Megatron's indexed dataset (`megatron`), Mosaic MDS (`mds`), nanoGPT's train.bin / val.bin
(`nanogpt`) and litdata's optimized chunks (`litdata`). docs/loader.md shows each trainer's code.

Every writer reads the shard folders (shard/train -> `train`, shard/eval -> `val`, the split names
llm-foundry, litgpt and nanoGPT use) in metadata order, ROWS_PER_BLOCK rows at a time (memory
stays bounded whatever the shard size), and writes its files into the folder it is given: export.py
writes into a temp folder and renames it into place. Pure numpy: no trainer library is needed to
write, only to read. Not here: choosing OUT, --force, the rename (export.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.exporters import litdata, mds, megatron, nanogpt
from pipeline.exporters.common import shard_splits

TRAINER_FORMATS = ("megatron", "mds", "nanogpt", "litdata")
WRITERS = {"megatron": megatron, "mds": mds, "nanogpt": nanogpt, "litdata": litdata}
UNITS = {"megatron": "sequences", "mds": "samples", "nanogpt": "tokens", "litdata": "rows"}
READERS = {  # what `pipeline export` prints: the trainer's reader, OUT replaced by the folder
    "megatron": "megatron.core.datasets.indexed_dataset.IndexedDataset('OUT/train')",
    "mds": "streaming.StreamingDataset(local='OUT/train')",
    "nanogpt": "np.memmap('OUT/train.bin', dtype=<meta.json dtype>, mode='r')",
    "litdata": "litdata.StreamingDataset('OUT/train', item_loader=TokensLoader(seq_len))",
}


def write(fmt: str, run_dir: Path, out: Path, progress: Callable[[int], None]) -> dict[str, int]:
    """Write format `fmt` of the run's shards into the existing folder `out`; count per split
    (UNITS[fmt])."""
    if fmt not in WRITERS:
        raise PipelineError(f"--to: got {fmt!r}, expected one of {', '.join(TRAINER_FORMATS)}")
    return WRITERS[fmt].write(shard_splits(run_dir), Path(out), progress)

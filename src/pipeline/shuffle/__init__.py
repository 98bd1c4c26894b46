"""Shard files and `pipeline shuffle`: rebalance unbalanced .npz shards into shuffled equal ones.

`npzio` memory-maps and writes uncompressed .npz shards, `quality` measures a shuffle,
`rebalance` is the two-phase command. The algorithm and its memory bound: docs/shards.md.
"""

from pipeline.shuffle.npzio import (
    COPY_BYTES,
    FORMAT_VERSION,
    METADATA_NAME,
    npz_fields,
    npz_member,
    save_npz,
    shard_name,
    shard_sizes,
)
from pipeline.shuffle.quality import ShuffleQuality
from pipeline.shuffle.rebalance import apportion, scan_inputs, shuffle_shards

__all__ = [
    "COPY_BYTES",
    "FORMAT_VERSION",
    "METADATA_NAME",
    "ShuffleQuality",
    "apportion",
    "npz_fields",
    "npz_member",
    "save_npz",
    "scan_inputs",
    "shard_name",
    "shard_sizes",
    "shuffle_shards",
]

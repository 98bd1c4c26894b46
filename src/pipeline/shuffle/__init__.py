"""`pipeline shuffle`: rebalance unbalanced .npz shards into shuffled equal ones.

`rebalance` is the two-phase command, `stats` measures how well an order is shuffled; the shard
file format itself lives in pipeline.shards. The algorithm and its memory bound: docs/shards.md.
"""

from pipeline.shuffle.rebalance import COPY_BYTES, apportion, scan_inputs, shuffle_shards
from pipeline.shuffle.stats import ShuffleStats

__all__ = ["COPY_BYTES", "ShuffleStats", "apportion", "scan_inputs", "shuffle_shards"]

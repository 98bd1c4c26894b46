"""Shuffling, the algorithms: how `pipeline shuffle` apportions rows between shards
(apportion.py) and how well an order is shuffled (stats.py). The command itself, which reads and
writes shard files, is pipeline.rebalance; the shard file format is pipeline.shards.
"""

from pipeline.shuffle.apportion import apportion
from pipeline.shuffle.stats import ShuffleStats

__all__ = ["ShuffleStats", "apportion"]

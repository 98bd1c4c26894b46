"""Deduplication algorithms used by the `dedup` stage: Bloom filter, MinHash, LSH, union-find.

Pure functions and small classes over numpy arrays; no I/O. The stage, its executor tasks and
work files live in stages/dedup/.
"""

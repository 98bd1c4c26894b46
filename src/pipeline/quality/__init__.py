"""Quality scoring internals: document statistics, hashed n-gram features, logistic regression.

Pure functions of in-memory data; the `quality` stage (pipeline.stages.quality) does the I/O.
"""

"""Reading the data: the data pass that makes block statistics, refinement's
scans, the samples kept for them, and ranges featurized tile by tile.

Each phase's tasks are one graph computed by the active dask scheduler; nothing
here creates a client.
"""

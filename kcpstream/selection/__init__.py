"""How many change-points: the rules (a count, a penalty, the slope heuristic,
the test), the features' long-run noise and the p-values, the trend check.

I/O-free: it works on block statistics. Nothing here imports dask, zarr,
xarray or fsspec.
"""

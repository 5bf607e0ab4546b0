"""The search, I/O-free: block statistics, binary segmentation and dynamic
programming as generators that ask for scans and are given their results.

Nothing here imports dask, zarr, xarray or fsspec.
"""

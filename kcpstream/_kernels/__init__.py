"""Pure kernels on plain arrays (numba ``njit(nogil=True)`` and tiled numpy); no dask here."""

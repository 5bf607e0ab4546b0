"""Task graphs on dask: its internals in one place, calls batched into one
graph, the active scheduler."""

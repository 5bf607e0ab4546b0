"""``obj.kcp``: kcpstream as an xarray accessor on DataArrays and Datasets."""

from __future__ import annotations

from typing import Any

import xarray as xr

__all__ = ["KcpAccessor"]


class KcpAccessor:
    """``obj.kcp.segment(...)`` is ``kcpstream.segment(obj, ...)``."""

    def __init__(self, obj: xr.DataArray | xr.Dataset) -> None:
        self._obj = obj

    def segment(self, **kwargs: Any):
        """Segment this object; see :func:`kcpstream.segment` for the parameters."""
        from kcpstream.api import segment

        return segment(self._obj, **kwargs)


xr.register_dataarray_accessor("kcp")(KcpAccessor)
xr.register_dataset_accessor("kcp")(KcpAccessor)

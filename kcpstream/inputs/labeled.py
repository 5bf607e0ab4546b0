"""xarray inputs: the time axis, channels, batch series.

A DataArray or Dataset becomes one signal (or one per batch label): the
``dim`` axis is time; every other dimension is a channel of a multivariate
signal, except the ``batch_dims``, along which the object is cut into
independent series.  The coordinate of ``dim`` gives the change-points their
times; it is checked (present, strictly increasing) but never copied whole:
values are looked up at the positions a result needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from kcpstream.inputs.checks import check_dtype, default_chunk


class LazyCoord:
    """A coordinate read only at the positions asked for: a zarr array (decoded
    as xarray decodes it: CF times and durations, scale, offset, fill values)
    or a lazily loaded xarray variable.  A coordinate of 10**10 time stamps
    is 80 GB; a result needs a few dozen.

    Its order cannot be checked whole (that would read it all); the values
    read are: a missing time (NaT) there, or times that do not increase with
    the positions, is an :class:`~kcpstream.InputError`, and so is a
    position whose chunk the store lacks (zarr would read it as the fill
    value) or cannot read."""

    def __init__(self, read, n: int, name: str = "time", stored: Any = None) -> None:
        self._read = read
        self.n = int(n)
        self.name = name
        self._stored = stored  # the zarr array it is read from, when known
        self._missing: list[tuple[int, int]] | None = None  # runs of absent chunks

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, positions) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n):
            raise IndexError(f"positions outside a coordinate of {self.n} values")
        if not positions.size:
            return np.asarray(self._values(np.zeros(1, np.int64)))[:0]
        values = np.asarray(self._values(positions))
        self._check(positions, values)
        return values

    def _values(self, positions: np.ndarray) -> np.ndarray:
        self._check_stored(positions)
        try:
            return self._read(positions)
        except Exception as exc:  # a damaged chunk: one line, never a codec's traceback
            from kcpstream.errors import one_line

            raise _error(
                f"cannot read the {self.name!r} coordinate at positions "
                f"{int(positions.min())}-{int(positions.max())}: {type(exc).__name__}: "
                f"{one_line(exc)}; restore or rewrite its chunks"
            ) from None

    def _check_stored(self, positions: np.ndarray) -> None:
        """A position in a chunk the store lacks would read as the fill value."""
        if self._stored is None:
            return
        from kcpstream.inputs import provenance as pv

        if self._missing is None:  # one listing
            stored = pv.StoredArray(self._stored, 0, (0, self.n))
            self._missing = pv.missing_rows(stored, pv.chunk_versions(self._stored)[0])
        for a, b in self._missing:
            if ((positions >= a) & (positions < b)).any():
                raise _error(
                    f"the {self.name!r} coordinate has no chunk for positions [{a}, {b}) "
                    "(zarr would read the fill value as a time); restore the chunk"
                )

    def _check(self, positions: np.ndarray, values: np.ndarray) -> None:
        if values.dtype.kind in "mM" and np.isnat(values).any():
            bad = int(positions[int(np.argmax(np.isnat(values)))])
            raise _error(f"the {self.name!r} coordinate has a missing value (NaT) at {bad}")
        if values.dtype.kind not in "mMiuf" or values.size < 2:
            return
        order = np.argsort(positions, kind="stable")
        p, v = positions[order], values[order]
        apart = p[1:] > p[:-1]
        falls = apart & ~(v[1:] > v[:-1])
        if falls.any():
            k = int(np.argmax(falls))
            raise _error(
                f"the {self.name!r} coordinate is not strictly increasing (at positions "
                f"{int(p[k])} and {int(p[k + 1])}); sort the data along {self.name!r} and "
                "drop duplicate times"
            )

    @classmethod
    def of_zarr(cls, array: Any, name: str = "time") -> LazyCoord:
        """The 1-D zarr array ``array`` as a coordinate, decoded as xarray would."""
        attrs = dict(array.attrs)
        if "_FillValue" not in attrs and array.metadata.zarr_format == 2:
            fill = array.metadata.fill_value  # (zarr 2 keeps it in the array's metadata)
            if fill is not None:
                attrs["_FillValue"] = fill

        def read(positions: np.ndarray) -> np.ndarray:
            import warnings

            import xarray as xr

            values = array.get_coordinate_selection(positions)
            var = xr.Variable((name,), values, attrs)
            with warnings.catch_warnings():  # xarray's notes on decoding defaults
                warnings.simplefilter("ignore")
                return np.asarray(xr.conventions.decode_cf_variable(name, var).values)

        return cls(read, array.shape[0], name, array)


@dataclass(frozen=True)
class TimeAxis:
    """The time dimension of a labelled input and its coordinate (or positions)."""

    dim: str
    coord: Any = None  # a pandas Index, a numpy array, a LazyCoord, or None (positions)

    def at(self, positions: np.ndarray | list[int]) -> np.ndarray:
        """Coordinate values at integer positions (the positions when there is no coordinate)."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.coord is None:
            return positions
        return np.asarray(self.coord[positions])


def _error(msg: str) -> Exception:
    from kcpstream.errors import InputError

    return InputError(msg)


def _time_axis(obj: Any, dim: str | None) -> TimeAxis:
    dims = list(obj.dims)
    if dim is None:
        if "time" in dims:
            dim = "time"
        elif len(dims) == 1:
            dim = dims[0]
        else:
            raise _error(
                f"which dimension is time? the object has dimensions {tuple(dims)}; pass dim=<name>"
            )
    if dim not in dims:
        raise _error(f"the object has no dimension {dim!r}; its dimensions are {tuple(dims)}")
    if dim not in obj.coords:
        return TimeAxis(dim)
    if dim not in obj.indexes and not isinstance(obj[dim].variable._data, np.ndarray):
        # a coordinate opened without an index (create_default_indexes=False) is
        # read at the positions a result needs, never whole
        from kcpstream.inputs.provenance import stored_array

        var = obj[dim].variable
        found = stored_array(obj[dim], dim)
        stored = found.array if found is not None and found.rows == (0, var.shape[0]) else None
        read = LazyCoord(lambda pos: var.isel({dim: pos}).values, var.shape[0], dim, stored)
        return TimeAxis(dim, read)
    index = obj.indexes.get(dim) if dim in obj.indexes else None
    coord = index if index is not None else np.asarray(obj[dim].values)
    values = np.asarray(coord)
    if values.dtype.kind in "mM" and np.isnat(values).any():
        bad = int(np.argmax(np.isnat(values)))
        raise _error(f"the {dim!r} coordinate has a missing value (NaT) at position {bad}")
    if len(values) > 1:
        increasing = (
            index.is_monotonic_increasing and index.is_unique
            if index is not None
            else bool(np.all(values[1:] > values[:-1]))
        )
        if not increasing:
            _check_coordinate_chunks(obj, dim)
            order = values[1:] > values[:-1] if values.dtype.kind != "O" else None
            where = "" if order is None else f" (first at position {int(np.argmin(order)) + 1})"
            raise _error(
                f"the {dim!r} coordinate is not strictly increasing{where}; sort the data "
                f"along {dim!r} (obj.sortby({dim!r})) and drop duplicate times"
            )
    return TimeAxis(dim, coord)


def _check_coordinate_chunks(obj: Any, dim: str) -> None:
    """An :class:`InputError` naming the positions of a chunk the time coordinate
    lacks in the zarr store ``obj`` was opened from: xarray read its fill
    value as times, which then do not increase.  Looked for only once the
    times are found out of order (no cost otherwise); nothing when the store
    cannot be found."""
    import zarr

    from kcpstream.inputs import provenance as pv

    stored = pv.stored_array(obj)
    arrays = [stored] if stored is not None else []
    data = getattr(getattr(obj, "variable", None), "_data", None)
    if not arrays and hasattr(data, "dask"):
        arrays = pv.graph_sources(data)[0]
    for found in arrays[:1]:
        parent = found.array.path.rpartition("/")[0]
        try:
            coord = zarr.open_array(store=found.array.store, path=f"{parent}/{dim}".lstrip("/"))
        except Exception:  # no such array beside it: nothing to say
            return
        whole = pv.StoredArray(coord, 0, (0, int(coord.shape[0])))
        for a, b in pv.missing_rows(whole, pv.chunk_versions(coord)[0]):
            raise _error(
                f"the {dim!r} coordinate has no chunk for positions [{a}, {b}) (its fill "
                "value was read as times); restore the chunk"
            )


def labeled_signal(
    obj: Any, dim: str | None = None, variables: list[str] | None = None, chunks: int | None = None
) -> tuple[da.Array, TimeAxis, str, Any]:
    """``(data (n, d) dask array, time axis, description, source)`` for a DataArray
    or Dataset; ``source`` is what the data slices when it can be read directly
    (see :func:`_as_channels`), else None."""
    import xarray as xr

    if isinstance(obj, xr.Dataset):
        names = (
            list(variables)
            if variables
            else [name for name, v in obj.data_vars.items() if (dim or "time") in v.dims]
        )
        missing = [name for name in names if name not in obj.data_vars]
        if missing:
            raise _error(
                f"the Dataset has no variable {missing[0]!r}; its variables are "
                f"{', '.join(map(str, obj.data_vars)) or 'none'}"
            )
        if not names:
            raise _error(
                f"no variable of the Dataset has the dimension {dim or 'time'!r}; choose "
                "variables=[...] or the time dimension with dim="
            )
        axis = _time_axis(obj[names[0]], dim)
        parts = []
        for name in names:
            if axis.dim not in obj[name].dims:
                raise _error(f"variable {name!r} has no {axis.dim!r} dimension")
            parts.append(_as_channels(obj[name], axis.dim, chunks))
        word = "variable" if len(names) == 1 else "variables"
        description = f"Dataset ({word} {', '.join(map(repr, names))})"
        if len(parts) == 1:
            return parts[0][0], axis, description, parts[0][1]
        return da.concatenate([p for p, _ in parts], axis=1), axis, description, None
    axis = _time_axis(obj, dim)
    data, origin = _as_channels(obj, axis.dim, chunks)
    return data, axis, _described(obj), origin


def _described(arr: Any) -> str:
    """A DataArray as messages name it: by its name, or as unnamed."""
    return "an unnamed DataArray" if arr.name is None else f"DataArray {arr.name!r}"


def _stored_chunk(arr: Any, dim: str) -> int | None:
    """Samples per stored object along ``dim`` of the zarr array under ``arr``."""
    from kcpstream.inputs.provenance import stored_array

    found = stored_array(arr, dim)
    return None if found is None else int(found.step)


def _as_channels(arr: Any, dim: str, chunks: int | None) -> tuple[da.Array, Any]:
    """A DataArray as (time, every other dimension flattened) dask array, and
    what it reads when that can be sliced directly (see
    :func:`kcpstream.tasks.internals.array_source`): the numpy array of an in-memory
    DataArray, the array-like of a lazily loaded one; else None."""
    from kcpstream.tasks.internals import array_source

    _check_decoded(arr)
    lazy = not isinstance(arr.variable._data, np.ndarray | da.Array)
    # the store's objects along time, seen before the transpose (whose lazy
    # indexer hides which stored axis is time)
    stored = _stored_chunk(arr, dim) if lazy else None
    arr = arr.transpose(dim, ...)
    check_dtype(np.dtype(arr.dtype), _described(arr))
    if lazy:
        # loaded lazily (no dask): its ``.data`` would read it whole; chunked along
        # the store's objects, each task reads its rows (the store, for identity
        # and checkpoints, is followed from the object itself: see as_signal)
        arr = arr.chunk({dim: stored or default_chunk(arr.sizes[dim])})
    raw = arr.data
    if isinstance(raw, da.Array):
        origin = array_source(raw)
    else:
        raw = origin = np.asarray(raw)
        raw = da.from_array(raw, chunks=(chunks or default_chunk(raw.shape[0]),) + raw.shape[1:])
    if raw.ndim == 1:
        return raw[:, None], origin
    raw = raw.rechunk({i: -1 for i in range(1, raw.ndim)})
    flat = raw.reshape(raw.shape[0], int(np.prod(raw.shape[1:])))
    return flat, origin if raw.ndim == 2 else None


#: Attributes xarray's decoding takes out of ``attrs`` (into ``encoding``) that
#: change what the stored numbers mean beyond a scale: left in ``attrs``, a
#: fill value would be read as samples, and unsigned numbers as signed ones.
#: (A scale and an offset alone leave the values an affine map of the decoded
#: ones: raw values are then another input, not a wrong one.)
CF_CODING_ATTRS = ("_FillValue", "missing_value", "_Unsigned")


def _check_decoded(arr: Any) -> None:
    """An :class:`~kcpstream.InputError` for a DataArray whose values are stored
    numbers still to be decoded (opened with ``mask_and_scale=False`` or
    ``decode_cf=False``) where that matters: a fill value (other than NaN)
    or unsigned numbers stored as signed."""
    coding = {k: arr.attrs[k] for k in CF_CODING_ATTRS if k in arr.attrs and not _nan(arr.attrs[k])}
    if coding:
        said = ", ".join(f"{k}={v!r}" for k, v in coding.items())
        raise _error(
            f"{_described(arr)} holds stored numbers still to be decoded ({said} in its "
            "attrs), so a fill value would be read as samples: open it with xarray's "
            "default decoding (mask_and_scale=True), or decode it with xarray.decode_cf"
        )


def _nan(value: Any) -> bool:
    """Whether an attribute's value is NaN (a fill value of NaN decodes to itself)."""
    try:
        return bool(np.all(np.isnan(np.asarray(value, dtype=np.float64))))
    except (TypeError, ValueError):
        return False


def split_batches(obj: Any, batch_dims: list[str]) -> list[tuple[dict[str, Any], Any]]:
    """One ``(labels, sub-object)`` per combination of the batch dimensions' values."""
    for b in batch_dims:
        if b not in obj.dims:
            raise _error(
                f"batch dimension {b!r} is not a dimension of the object {tuple(obj.dims)}"
            )
    sizes = [obj.sizes[b] for b in batch_dims]
    out = []
    for idx in np.ndindex(*sizes):
        sel = dict(zip(batch_dims, idx, strict=True))
        sub = obj.isel(sel)
        labels = {
            b: (sub[b].values.item() if b in sub.coords else int(i))
            for b, i in zip(batch_dims, idx, strict=True)
        }
        out.append((labels, sub))
    return out


def encode_times(values: np.ndarray) -> dict[str, Any]:
    """Coordinate values as JSON: ISO strings for datetimes, numbers otherwise."""
    values = np.asarray(values)
    if values.dtype.kind == "M":
        return {"dtype": str(values.dtype), "values": np.datetime_as_string(values).tolist()}
    if values.dtype.kind == "m":
        return {"dtype": str(values.dtype), "values": values.astype(np.int64).tolist()}
    return {"dtype": str(values.dtype), "values": values.tolist()}


def decode_times(data: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype(data["dtype"])
    if dtype.kind == "m":
        return np.asarray(data["values"], dtype=np.int64).astype(dtype)
    return np.asarray(data["values"], dtype=dtype)


def stored_time_axis(group: Any, array: Any, dim: str | None) -> TimeAxis | None:
    """The time axis of a zarr array in a group written by xarray: its first
    dimension's name (zarr 3 ``dimension_names``, zarr 2 ``_ARRAY_DIMENSIONS``)
    and the group's 1-D array of that name as a :class:`LazyCoord`; None when
    the store does not say."""
    names = getattr(array.metadata, "dimension_names", None) or array.attrs.get("_ARRAY_DIMENSIONS")
    if not names or names[0] is None:
        return None
    if dim is not None and dim != names[0]:
        raise _error(
            f"the array's first dimension is {names[0]!r}, not dim={dim!r}; kcpstream reads "
            "time along the first axis of a stored array (open it with xarray to choose)"
        )
    dim = str(names[0])
    try:
        coord = group[dim] if group is not None and dim in group.array_keys() else None
    except Exception:  # an unreadable coordinate: positions instead
        coord = None
    if coord is None or coord.ndim != 1 or coord.shape[0] != array.shape[0]:
        return TimeAxis(dim)
    return TimeAxis(dim, LazyCoord.of_zarr(coord, dim))


def open_zarr_lazily(path: str, storage_options: dict | None = None) -> Any:
    """``xarray.open_zarr`` without loading the time index whole where xarray
    allows it (``create_default_indexes=False``: the coordinate is then read at
    the positions a result needs) and without dask (``chunks=None``: a series
    taken from it is then known to read the store directly, so that a
    checkpoint of it follows the store as it changes; kcpstream chunks it
    along the store's objects), zarr's notes on consolidated metadata
    silenced.  Errors are xarray's and zarr's own."""
    import inspect
    import warnings

    import xarray as xr

    kwargs: dict[str, Any] = {"consolidated": None, "chunks": None}
    if storage_options:
        kwargs["storage_options"] = storage_options
    if "create_default_indexes" in inspect.signature(xr.open_zarr).parameters:
        kwargs["create_default_indexes"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_zarr(path, **kwargs)

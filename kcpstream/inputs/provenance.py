"""Where a signal's samples live, whether the store holds them all, and an
identity that changes whenever they may have.

A zarr store does not write a chunk whose samples all equal the array's fill
value, and reads an absent chunk as fill values.  So a chunk lost from an
archive reads as a run of zeros (or whatever the fill value is): a plausible
signal with two change-points at its edges.  :func:`check_complete` lists the
store (one listing, no chunk is read) and refuses absent chunks unless the
caller says that fill values are what they mean.

The same listing gives every chunk's version: size, modification and change
times and inode on a file system (of a symbolic link's target), the ETag (or
modification time) on an object store.  With the
array's metadata it makes :func:`zarr_identity`, which a checkpoint keys on, so
a chunk rewritten in place, an append, a shrink or a changed codec gives
another key: a checkpoint is never served for data that changed.  An
in-memory array's identity is a hash of its bytes.  An input whose origin
cannot be followed (a dask array computed from other arrays) has no identity.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

#: What ``missing=`` accepts: refuse absent chunks, or read them as fill values.
MISSING_CHOICES = ("error", "skip", "fill")


@dataclass(frozen=True)
class StoredArray:
    """A zarr array a signal reads, and which part of it.

    Attributes
    ----------
    array : zarr.Array
        The array in its store.
    axis : int or None
        The array's time axis (None: not known, the whole array is read).
    rows : tuple of int
        ``[start, end)`` along ``axis`` that the signal reads.
    """

    array: Any
    axis: int | None
    rows: tuple[int, int] = (0, 0)
    #: how the other axes are taken (slices, indices): part of the identity
    select: tuple = ()
    #: how xarray decodes the stored values (CF scale, offset, mask): part of
    #: the identity ("" when the stored values are read as they are)
    decoding: str = ""

    @property
    def step(self) -> int:
        """Rows of one stored object (shard, or chunk) along the time axis."""
        return _grid(self.array)[0][self.axis]

    @property
    def where(self) -> str:
        """The store and the array's path in it, for messages."""
        store = self.array.store
        root = getattr(store, "root", None) or getattr(store, "path", None) or str(store)
        path = self.array.path
        return f"{root}/{path}" if path else str(root)


#: xarray's adapters that pass values and indexing through unchanged.
_PASSING = ("MemoryCachedArray", "CopyOnWriteArray", "ZarrArrayWrapper")


def _unwrap(obj: Any, strict: bool = True) -> tuple[Any, Any, str]:
    """Follow xarray's indexing adapters (``.array``, ``._array``) down to a zarr
    array: ``(zarr array, the LazilyIndexedArray key on the way or None, the
    decoding applied on the way)``.  With ``strict``, ``(None, None, "")`` when
    an adapter on the way is one whose effect is not followed (a lazy
    transpose's vectorized indexer, a second indexer): which sample is which
    stored row is then not known.  Without, any adapter is passed (the whole
    array is the source, and the caller's token says what is done to it)."""
    import zarr

    key = None
    decoding: list[str] = []
    for _ in range(12):  # the adapters xarray stacks: a handful
        if obj is None:
            break
        if isinstance(obj, zarr.Array):
            return obj, key, "|".join(decoding)
        kind = type(obj).__name__
        if kind == "LazilyIndexedArray":
            if key is not None and strict:
                break
            key = getattr(obj, "key", None)
        elif kind == "_ElementwiseFunctionArray":  # CF decoding (scale, offset, mask)
            described = _describe(getattr(obj, "func", None))
            if described is None and strict:
                break
            decoding.append(described or kind)
        elif kind not in _PASSING and strict:
            break
        inner = getattr(obj, "array", None)  # (not ``or``: a 0-d adapter has no truth value)
        obj = inner if inner is not None else getattr(obj, "_array", None)
    return None, None, ""


def _describe(func: Any) -> str | None:
    """A stable text of an elementwise decoding function (a ``functools.partial``
    of a module-level function and plain values), or None."""
    if not isinstance(func, functools.partial):
        return None
    inner = func.func
    name = f"{getattr(inner, '__module__', '')}.{getattr(inner, '__qualname__', '')}"
    if "<" in name:  # a lambda or a local function: no stable name
        return None
    keywords = sorted((k, repr(v)) for k, v in func.keywords.items())
    return json.dumps([name, [repr(a) for a in func.args], keywords])


def stored_array(obj: Any, dim: str | None = None) -> StoredArray | None:
    """The zarr array under ``obj`` and the rows it reads, when ``obj`` is a zarr
    array or an xarray DataArray (or a Dataset of one) opened lazily from a
    zarr store (without dask), sliced along time and sliced or indexed along
    its other axes (a batch's series); else None (see :func:`graph_sources`)."""
    import zarr

    if isinstance(obj, zarr.Array):
        return StoredArray(obj, 0, (0, int(obj.shape[0]) if obj.ndim else 0))
    data_vars = getattr(obj, "data_vars", None)
    if data_vars is not None:  # a Dataset: its one variable
        if len(data_vars) != 1:
            return None
        obj = next(iter(data_vars.values()))
    variable = getattr(obj, "variable", None)
    node = getattr(variable, "_data", None)
    if node is None or hasattr(node, "dask"):
        return None
    node, key, decoding = _unwrap(node)
    dims = list(variable.dims)
    if not isinstance(node, zarr.Array):
        return None
    if node.ndim == 0:  # a scalar (a coordinate): the whole array
        return StoredArray(node, None, (0, 0), (), decoding)
    entries = getattr(key, "tuple", None) if key is not None else (slice(None),) * node.ndim
    if entries is None or len(entries) != node.ndim:
        return None
    select = [_selection(e, int(n)) for e, n in zip(entries, node.shape, strict=True)]
    if any(e is None for e in select):
        return None
    kept = [i for i, e in enumerate(select) if e[0] != "i"]  # the axes the variable has
    if len(kept) != len(dims):
        return None
    axis = kept[dims.index(dim)] if dim in dims else kept[0]
    if select[axis][0] != "s":
        return None
    rows = (select[axis][1], select[axis][2])
    others = tuple(e for i, e in enumerate(select) if i != axis)
    return StoredArray(node, axis, rows, others, decoding)


def _selection(entry: Any, size: int) -> tuple | None:
    """One axis of an xarray indexer: ``("s", start, stop)`` (a slice of step
    1), ``("i", index)`` (an integer: the axis is dropped), ``("a", indices)``
    (integers: the axis is kept), or None (anything else)."""
    if isinstance(entry, slice):
        start, stop, step = entry.indices(size)
        return ("s", start, stop) if step == 1 else None
    if isinstance(entry, int | np.integer):
        return ("i", int(entry) % size)
    values = np.asarray(entry)
    if values.ndim == 1 and values.dtype.kind in "iu":
        return ("a", [int(v) % size for v in values])
    return None


def graph_sources(x: Any) -> tuple[list[StoredArray], list[np.ndarray]]:
    """The zarr arrays (whole) and numpy arrays a dask array's graph holds as
    data: what ``da.from_zarr``, ``da.from_array`` and xarray's ``open_zarr``
    put in it.  Tasks that read data by other means are not seen."""
    import zarr

    stores: dict[int, StoredArray] = {}
    arrays: dict[int, np.ndarray] = {}
    for layer in x.dask.layers.values():
        if type(layer).__name__ != "MaterializedLayer":
            continue
        for value in layer.values():
            value = getattr(value, "value", value)  # a DataNode holds it
            if isinstance(value, np.ndarray):
                arrays[id(value)] = value
                continue
            arr, _, decoding = _unwrap(value, strict=False)
            if isinstance(arr, zarr.Array) and arr.ndim:
                stores[id(arr)] = StoredArray(arr, None, decoding=decoding)
    return list(stores.values()), list(arrays.values())


def _grid(array: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The storage grid (shards, or chunks when unsharded): shape of one
    stored object and the number of them along each axis."""
    size = tuple(int(c) for c in (array.shards or array.chunks))
    counts = tuple(-(-int(s) // c) for s, c in zip(array.shape, size, strict=True))
    return size, counts


def _list_local(root: str) -> dict[str, tuple]:
    """Every file under ``root`` (relative key) with a version of its content:
    size, modification and change times (ns) and inode.  Symbolic links are
    followed (a store whose chunks or folders link to an object store of
    git-annex, DVC, ...): the version is the target's.  The change time is
    there because the others can repeat for other content: a tool that
    restores modification times (``tar``, ``rsync -t``, ``cp -p``) onto a
    file it rewrote in place, or a freed inode number used again; the kernel
    sets it on every write and no user call can set it back."""
    out: dict[str, tuple] = {}
    todo = [root]
    seen: set[tuple[int, int]] = set()  # folders walked (a link back up is not followed)
    while todo:
        folder = todo.pop()
        try:
            st = os.stat(folder)
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        for entry in entries:
            try:
                if entry.is_dir():
                    todo.append(entry.path)
                    continue
                st = entry.stat()
            except FileNotFoundError:  # a dangling link, or removed since the listing
                continue
            key = os.path.relpath(entry.path, root).replace(os.sep, "/")
            out[key] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    return out


def _list_fsspec(store: Any, prefix: str) -> dict[str, tuple] | None:
    from zarr.core.sync import sync

    fs = store.fs
    root = f"{store.path.rstrip('/')}/{prefix}".rstrip("/")
    _forget_listings(fs, root)
    if getattr(fs, "async_impl", False):
        found = sync(fs._find(root, detail=True))
    else:
        found = fs.find(root, detail=True)
    out: dict[str, tuple] = {}
    for name, info in found.items():
        version = next(
            (
                info[k]
                for k in ("ETag", "etag", "mtime", "LastModified", "last_modified")
                if info.get(k) is not None
            ),
            None,
        )
        if version is None:
            return None  # a store without versions: sizes alone do not show rewrites
        key = name[len(root) :].lstrip("/") if name.startswith(root) else name
        out[key] = (info.get("size"), str(version))
    return out


def _forget_listings(fs: Any, root: str) -> None:
    """Drop what the file system's directory cache holds under ``root``.

    fsspec file systems are cached per process, and so are their listings: an
    s3fs instance that listed a store once answers later listings, and the
    existence checks of later reads, from that first listing, so chunks another
    writer appended since would be missing, read as fill values.  Each
    identity is made from a fresh listing, which the reads then use."""
    cache = getattr(fs, "dircache", None)
    if cache is None:
        return
    try:
        base = fs._strip_protocol(root).rstrip("/")
    except Exception:  # pragma: no cover - a file system without the helper
        base = root
    for key in [k for k in list(cache) if k == base or str(k).startswith(base + "/")]:
        cache.pop(key, None)
    invalidate = getattr(fs, "invalidate_cache", None)
    if invalidate is not None:
        invalidate(base)  # and its parents' entries


def _is_local(fs: Any) -> bool:
    protocol = getattr(fs, "protocol", ())
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return "file" in protocols or "local" in protocols


def chunk_versions(array: Any) -> tuple[set[str], dict[str, tuple] | None]:
    """The keys the store holds under ``array`` (relative to it) and, when the
    store can tell, a version of each (else None): one listing, no chunk read."""
    store = array.store
    path = array.path
    kind = type(store).__name__
    if kind == "LocalStore":
        versions = _list_local(os.path.join(str(store.root), path))
        return set(versions), versions
    if kind == "FsspecStore" and _is_local(store.fs):  # a file:// URL: the file's own stat
        versions = _list_local(os.path.join(store.path, path))
        return set(versions), versions
    if kind == "FsspecStore":
        versions = _list_fsspec(store, path)
        if versions is not None:
            return set(versions), versions
    from zarr.core.sync import sync

    async def keys() -> list[str]:
        return [k async for k in store.list_prefix(path)]

    prefix = f"{path}/" if path else ""
    return {k[len(prefix) :] for k in sync(keys())}, None


def _objects(stored: StoredArray):
    """``(coords, key)`` of every stored object under the read rows and the
    other axes' selection (a batch's series: its own sensor's objects; every
    object when the time axis is not known)."""
    array = stored.array
    size, counts = _grid(array)
    ax = stored.axis
    allowed = _selected_objects(stored, size) or {}
    # each axis' objects, in order: only those selected are walked (a batch of
    # ten thousand series, one object of the sensor axis each, walked all ten
    # thousand for each series, 10^8 steps before the fit)
    axes = []
    for i, count in enumerate(counts):
        if i == ax:
            first = stored.rows[0] // stored.step
            axes.append(range(first, min(count, -(-stored.rows[1] // stored.step))))
        elif i in allowed:
            axes.append(sorted(k for k in allowed[i] if 0 <= k < count))
        else:
            axes.append(range(count))
    for coords in itertools.product(*axes):
        yield coords, array.metadata.encode_chunk_key(coords)


def _selected_objects(stored: StoredArray, size: tuple[int, ...]) -> dict[int, set] | None:
    """For each axis but time, the indices of the stored objects its selection
    reads (None: every object, when the selection is not known)."""
    ax = stored.axis
    if ax is None or len(stored.select) != len(size) - 1:
        return None
    others = [i for i in range(len(size)) if i != ax]
    allowed: dict[int, set] = {}
    for i, entry in zip(others, stored.select, strict=True):
        step = size[i]
        if entry[0] == "s":
            allowed[i] = set(range(entry[1] // step, -(-entry[2] // step)))
        elif entry[0] == "i":
            allowed[i] = {entry[1] // step}
        else:
            allowed[i] = {v // step for v in entry[1]}
    return allowed


def _absent(stored: StoredArray, present: set[str]):
    """:func:`_objects` that the store lacks."""
    return ((coords, key) for coords, key in _objects(stored) if key not in present)


def _absent_inner(stored: StoredArray, present: set[str]) -> list[tuple[tuple[int, ...], str]]:
    """``(chunk coords, label)`` of the chunks the signal reads that a shard the
    store holds lacks: its index says so (zarr reads such a chunk as the fill
    value, as it reads an absent chunk of an unsharded array).  One read of
    each shard's index; none for an unsharded array."""
    array = stored.array
    if array.shards is None:
        return []
    from zarr.core.sync import sync

    codec = array.metadata.codecs[0]
    inner = tuple(int(c) for c in array.chunks)
    per_shard = tuple(int(s) // c for s, c in zip(array.shards, inner, strict=True))
    shards = [(coords, key) for coords, key in _objects(stored) if key in present]
    base = array._async_array.store_path

    async def indexes():
        import asyncio

        return await asyncio.gather(
            *(codec._load_shard_index_maybe(base / key, per_shard) for _, key in shards)
        )

    allowed = _selected_objects(stored, inner)
    ax = stored.axis
    out = []
    for (coords, key), index in zip(shards, sync(indexes()), strict=True):
        for local in np.ndindex(*per_shard):
            chunk = tuple(c * k + j for c, k, j in zip(coords, per_shard, local, strict=True))
            if any(c * n >= s for c, n, s in zip(chunk, inner, array.shape, strict=True)):
                continue  # past the array's edge
            if ax is not None and not (
                chunk[ax] * inner[ax] < stored.rows[1]
                and (chunk[ax] + 1) * inner[ax] > stored.rows[0]
            ):
                continue
            if allowed is not None and not all(chunk[i] in ok for i, ok in allowed.items()):
                continue
            if index is None or index.get_chunk_slice(chunk) is None:
                out.append((chunk, f"{local} of shard {key}"))
    return out


def missing_keys(stored: StoredArray, present: set[str]) -> list[str]:
    """The keys of the stored objects the signal reads that the store lacks
    (and the chunks its shards lack)."""
    return [key for _, key in _absent(stored, present)] + [
        label for _, label in _absent_inner(stored, present)
    ]


def missing_rows(stored: StoredArray, present: set[str]) -> list[tuple[int, int]]:
    """``[start, end)`` runs of the read rows (relative to the first) that lie in
    an absent chunk, or in a chunk a shard lacks (``stored.axis`` must be known)."""
    ax = stored.axis
    spans = {(c[ax] * stored.step, (c[ax] + 1) * stored.step) for c, _ in _absent(stored, present)}
    step = int(stored.array.chunks[ax])
    spans |= {(c[ax] * step, (c[ax] + 1) * step) for c, _ in _absent_inner(stored, present)}
    runs: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        a = max(lo, stored.rows[0]) - stored.rows[0]
        b = min(hi, stored.rows[1]) - stored.rows[0]
        if runs and runs[-1][1] >= a:
            runs[-1] = (runs[-1][0], max(runs[-1][1], b))
        else:
            runs.append((a, b))
    return runs


class ChunkAbsent(FileNotFoundError):
    """A chunk the listing showed is absent when it is read."""


#: Keys of zarr's metadata (an absent one is zarr's business, not a chunk's).
_METADATA_KEYS = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


def _is_chunk(key: str) -> bool:
    return key.rsplit("/", 1)[-1] not in _METADATA_KEYS


def strict_reader(array: Any) -> Any:
    """``array`` read through its store such that an absent chunk is an error
    (:class:`ChunkAbsent`), not its fill value: the listing that
    :func:`check_complete` checked can be out of date by the time a chunk is
    read (a chunk deleted, or deleted and written again, while the store is
    read).  The array itself is returned when it cannot be wrapped."""
    try:
        from zarr.core.array import Array, AsyncArray
        from zarr.storage import StorePath

        inner = array._async_array
        wrapped = StorePath(_strict_store_class()(array.store), array.path)
        return Array(AsyncArray(inner.metadata, wrapped, inner.config))
    except Exception:  # another zarr's internals: reads as zarr does
        return array


def gap_reader(array: Any, description: str) -> Any:
    """``array`` read such that an absent chunk is missing samples (NaN), not
    its fill value: the same array with NaN as its fill value.  An array of
    integers cannot hold NaN: an :class:`~kcpstream.errors.InputError`."""
    from kcpstream.errors import InputError

    if array.dtype.kind != "f":
        fill = cf_attrs(array).get("_FillValue", None)
        if fill is not None and not stored_as_values(array) and fill == array.metadata.fill_value:
            return array  # an absent chunk reads as the CF fill value, decoded as NaN
        raise InputError(
            f"missing='skip' reads an absent chunk as missing samples (NaN), which "
            f"{description} ({array.dtype}) cannot hold; pass missing='error' or "
            "missing='fill', or store the values as floats"
        )
    try:
        from zarr.core.array import Array, AsyncArray

        inner = array._async_array
        meta = inner.metadata
        if np.isnan(np.asarray(meta.fill_value, dtype=np.float64)):
            return array
        nan = np.asarray(np.nan, dtype=array.dtype)[()]
        return Array(
            AsyncArray(dataclasses.replace(meta, fill_value=nan), inner.store_path, inner.config)
        )
    except InputError:
        raise
    except Exception:  # another zarr's internals: no safe way to tell fill values apart
        raise InputError(
            f"missing='skip' cannot read the absent chunks of {description} as missing with "
            "this version of zarr; pass missing='error' or missing='fill'"
        ) from None


@functools.cache
def _strict_store_class() -> type:
    """The store wrapper of :func:`strict_reader` (made once, on first use: zarr
    is imported lazily), named at module level (``__getattr__``) so it pickles."""
    from zarr.storage import WrapperStore

    class StrictStore(WrapperStore):
        """A store whose absent chunk is :class:`ChunkAbsent`."""

        @property
        def root(self):  # (for messages: StoredArray.where)
            return getattr(self._store, "root", None)

        @property
        def path(self):
            return getattr(self._store, "path", None)

        async def get(self, key, prototype, byte_range=None):
            got = await self._store.get(key, prototype, byte_range)
            if got is None and _is_chunk(key):
                raise ChunkAbsent(f"{key} is absent from the store")
            return got

        async def get_partial_values(self, prototype, key_ranges):
            key_ranges = list(key_ranges)
            got = await self._store.get_partial_values(prototype, key_ranges)
            for (key, _), value in zip(key_ranges, got, strict=True):
                if value is None and _is_chunk(key):
                    raise ChunkAbsent(f"{key} is absent from the store")
            return got

    StrictStore.__qualname__ = "StrictStore"
    return StrictStore


def __getattr__(name: str) -> Any:
    # ``kcpstream.inputs.provenance.StrictStore`` is how a pickled reader names its
    # store's class: a process that unpickles one (a dask worker) makes it here
    if name == "StrictStore":
        return _strict_store_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_complete(stored: StoredArray, present: set[str], description: str) -> None:
    """Raise :class:`~kcpstream.inputs.signal.InputError` when a chunk the signal reads
    is absent from the store."""
    if stored.axis is None:
        keys = missing_keys(stored, present)
        if not keys:
            return
        what = "chunk " + ", ".join(keys[:3]) + (" ..." if len(keys) > 3 else "")
    else:
        runs = missing_rows(stored, present)
        if not runs:
            return
        shown = ", ".join(f"[{a}, {b})" for a, b in runs[:3]) + (" ..." if len(runs) > 3 else "")
        what = f"chunk for samples {shown}"
    from kcpstream.errors import InputError

    fill = stored.array.metadata.fill_value
    raise InputError(
        f"{description}: the store has no {what} ({stored.where}); zarr "
        f"reads an absent chunk as the fill value ({fill}). Restore the chunk; or pass "
        "missing='skip' to segment its samples as missing (a gap), or missing='fill' if "
        "the store leaves out chunks that are all fill values"
    )


def check_skippable(stored: StoredArray, present: set[str], description: str) -> None:
    """With ``missing="skip"`` on a route that reads through xarray: an absent
    chunk is read as the array's fill value, which is a gap only when it reads
    as NaN (a NaN fill value, or a CF ``_FillValue`` xarray masks).  Any other
    fill value would be read as samples: an
    :class:`~kcpstream.inputs.signal.InputError` rather than invented samples."""
    array = stored.array
    fill = array.metadata.fill_value
    try:
        if np.isnan(np.asarray(fill, dtype=np.float64)):
            return
    except (TypeError, ValueError):
        pass
    cf_fill = cf_attrs(array).get("_FillValue", None)
    if cf_fill is not None and not stored_as_values(array) and cf_fill == fill:
        return  # decoded as NaN
    keys = missing_keys(stored, present)
    if not keys:
        return
    from kcpstream.errors import InputError

    raise InputError(
        f"{description}: the store has no chunk {keys[0]}"
        f"{f' (and {len(keys) - 1} more)' if len(keys) > 1 else ''} ({stored.where}), "
        f"which xarray reads as the fill value ({fill}), not as missing samples; "
        "segment the store by path (kcpstream.segment(path, variable=...) reads it as a "
        "gap with missing='skip'), or restore the chunk"
    )


def zarr_identity(stored: StoredArray, versions: dict[str, tuple] | None) -> str | None:
    """An identity of the array's metadata and of the version of every object
    the signal reads (:func:`_objects`: a batch's series, its own sensor's; an
    object not in the store counts as absent), or None when the store keeps
    no versions.  Only those: the identity of each of a thousand series
    hashed every series' objects, a million steps before the fit, and a
    rewrite of one sensor changed every sensor's."""
    if versions is None:
        return None
    meta = stored.array.metadata.to_dict()
    h = hashlib.sha256()
    h.update(json.dumps(_placed(stored, stored.rows), default=str).encode())
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    read = sorted(key for _, key in _objects(stored))
    if not any(meta_key in versions for meta_key in ("zarr.json", ".zarray")):
        # the listing's keys are not those zarr reads by (its metadata is not
        # among them): every object listed, so that a change anywhere shows
        read = sorted(versions)
    for key in read:
        h.update(json.dumps([key, versions.get(key)], default=str).encode())
    return h.hexdigest()


def _placed(stored: StoredArray, rows: Any) -> list:
    """Where and how a signal reads ``stored`` (its store, axis, ``rows``, the
    other axes' selection, and its decoding when there is one), for a hash."""
    placed = [stored.where, stored.axis, rows, stored.select]
    return placed + [stored.decoding] if stored.decoding else placed


def content_identity(array: np.ndarray) -> str:
    """A hash of an in-memory array's shape, dtype and bytes."""
    array = np.ascontiguousarray(array)
    h = hashlib.blake2b(digest_size=32)
    h.update(json.dumps([array.shape, array.dtype.str]).encode())
    if array.dtype.kind in "Mm":  # time stamps and durations: their integer counts
        h.update(memoryview(array.view(np.int64)).cast("B"))
    elif array.dtype.kind in "OUS":  # labels
        h.update(json.dumps([str(v) for v in array.ravel()]).encode())
    else:
        h.update(memoryview(array).cast("B"))
    return h.hexdigest()


@dataclass(frozen=True)
class Units:
    """Runs of a signal's samples, each with a hash of the versions of the
    stored objects that hold it: what a checkpoint keeps to tell, in a later
    version of the same array, which samples may have changed.

    Attributes
    ----------
    step : int
        Samples per stored object along time when run ``k`` is the samples of
        the ``k``-th run of objects (a signal read directly from its store),
        or 0 when run ``k`` is the valid samples of the input's ``k``-th chunk
        (a signal of the valid samples of a series with gaps).
    versions : dict of int to str
        Each run's hash.  For a run of valid samples it covers where they
        start among the valid samples too: a run moved by a change before it
        is a changed run.
    spans : dict of int to (int, int)
        Each run's samples ``[a, b)`` of the signal (``a == b``: none).
    """

    step: int
    versions: dict[int, str]
    spans: dict[int, tuple[int, int]]

    @classmethod
    def direct(cls, step: int, row0: int, n: int, versions: dict[int, str]) -> Units:
        """The runs of a signal of ``n`` samples whose sample ``i`` is row ``row0
        + i`` of a store whose slab ``k`` of objects holds rows ``[k * step,
        (k + 1) * step)`` and has versions hash ``versions[k]``."""
        spans = {
            k: (max(k * step - row0, 0), max(min((k + 1) * step - row0, n), 0)) for k in versions
        }
        return cls(step, dict(versions), spans)

    def changed(self, old: dict[int, str]) -> list[tuple[int, int]]:
        """The samples ``[a, b)`` of every run whose hash is not the one in
        ``old`` (an earlier version's :attr:`versions`; a run it does not
        hold is changed)."""
        return [
            self.spans[k]
            for k, v in self.versions.items()
            if old.get(k) != v and self.spans[k][0] < self.spans[k][1]
        ]


@dataclass(frozen=True, eq=False)
class Origin:
    """What a signal's samples are read from, for its identity.

    Attributes
    ----------
    stores : tuple of (StoredArray, versions)
        Zarr arrays read, each with the versions of its stored objects
        (None: the store keeps no versions).
    arrays : tuple of numpy.ndarray
        In-memory arrays read.
    token : str
        Everything else the samples depend on (a path, a selection, the name
        dask gives to the operations on top).
    """

    stores: tuple[tuple[StoredArray, dict[str, tuple] | None], ...] = ()
    arrays: tuple[np.ndarray, ...] = ()
    token: str = ""
    #: sample ``i`` is row ``rows[0] + i`` of the one store's time axis, unchanged
    #: (no operation on top): samples then change only where stored objects did
    direct: bool = False
    #: for the signal of a series' valid samples: ``(origin, starts, valid)``,
    #: the series' origin, its chunks' starts and each chunk's valid samples
    #: (see :meth:`valid_samples`)
    compacted: tuple | None = None
    #: for the signal of a series' windows: ``(origin, window)``, the series'
    #: origin and the samples per window (see :meth:`windowed`)
    windows: tuple | None = None

    def identity(self) -> str | None:
        """A hash that changes whenever the samples may have, or None when that
        cannot be told (no known source, or a store without versions)."""
        if not self.stores and not self.arrays:
            return None
        parts = [self.token]
        for stored, versions in self.stores:
            ident = zarr_identity(stored, versions)
            if ident is None:
                return None
            parts.append(ident)
        parts += [content_identity(a) for a in self.arrays]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def derived(self, token: str) -> Origin:
        """The origin of a signal computed from this one (``token`` says how)."""
        return Origin(self.stores, self.arrays, f"{self.token}|{token}")

    def valid_samples(self, token: str, starts: np.ndarray, valid: np.ndarray) -> Origin:
        """The origin of the signal of this one's valid samples: its chunks
        (``starts``, then ``n``) without their missing samples (``valid`` of
        each).  It has a :attr:`lineage` when this one has: a later version of
        the series keeps what did not change in the valid samples too."""
        compacted = (self, np.asarray(starts, np.int64), np.asarray(valid, np.int64))
        return dataclasses.replace(self.derived(token), compacted=compacted)

    def windowed(self, window: int) -> Origin:
        """The origin of the signal of this one's windows of ``window`` samples
        (window ``i`` holds samples ``[i * window, (i + 1) * window)``).  It has
        a :attr:`lineage` when this one has: a later version of the series keeps
        the statistics of the windows whose samples did not change."""
        return dataclasses.replace(self.derived(f"window={window}"), windows=(self, window))

    def _direct_store(self) -> tuple[StoredArray, dict[str, tuple]] | None:
        if not self.direct or len(self.stores) != 1 or self.arrays:
            return None
        stored, versions = self.stores[0]
        return None if versions is None or stored.axis is None else (stored, versions)

    @cached_property
    def lineage(self) -> str | None:
        """A hash of where the samples come from and how they are stored (the
        array, its codecs, chunk grid and fill value; not its length, nor its
        chunks' versions): two versions of one growing or rewritten array
        share it.  None unless the signal reads one store directly
        (:attr:`direct`) that keeps versions, or holds the valid samples of
        such a signal (its own lineage: the runs differ)."""
        if self.compacted is not None:
            parent = self.compacted[0].lineage
            if parent is None:
                return None
            return hashlib.sha256(f"{parent}|valid samples".encode()).hexdigest()
        if self.windows is not None:
            parent, window = self.windows
            if parent.lineage is None:
                return None
            return hashlib.sha256(f"{parent.lineage}|window={window}".encode()).hexdigest()
        found = self._direct_store()
        if found is None:
            return None
        stored = found[0]
        meta = {k: v for k, v in stored.array.metadata.to_dict().items() if k != "shape"}
        h = hashlib.sha256()
        h.update(json.dumps([self.token, *_placed(stored, stored.rows[0])]).encode())
        h.update(json.dumps(meta, sort_keys=True, default=str).encode())
        return h.hexdigest()

    @cached_property
    def units(self) -> Units | None:
        """The :class:`Units` of the signal's samples (of the channels read: a
        batch's series, its own); None without a :meth:`lineage`."""
        if self.compacted is not None:
            return self._valid_units()
        if self.windows is not None:
            return self._window_units()
        found = self._direct_store()
        if found is None:
            return None
        stored, versions = found
        slabs: dict[int, list] = {}
        for coords, key in _objects(stored):
            slabs.setdefault(coords[stored.axis], []).append([key, versions.get(key)])
        hashes = {
            i: hashlib.sha256(json.dumps(v, default=str).encode()).hexdigest()[:24]
            for i, v in slabs.items()
        }
        row0, row1 = stored.rows
        return Units.direct(stored.step, row0, row1 - row0, hashes)

    def _window_units(self) -> Units | None:
        """Units of a signal of windows: the series' runs, each over the windows
        that hold any of its samples (a window across two runs is in both, so it
        changes when either does), with the series' versions: the same step and
        hashes, so a checkpoint of the windows also tells which samples of the
        series changed (the fit a later version keeps, see
        :func:`kcpstream.engine.stored.stored_fit`)."""
        parent, window = self.windows
        under = parent.units
        if under is None:
            return None
        spans = {
            k: (a // window, -(-b // window)) if a < b else (a // window, a // window)
            for k, (a, b) in under.spans.items()
        }
        return Units(under.step, dict(under.versions), spans)

    def _valid_units(self) -> Units | None:
        """Units of a signal of valid samples: a run per chunk of the series,
        hashed with the series' runs under it, where the chunk lies and where
        its valid samples start among all."""
        parent, starts, valid = self.compacted
        under = parent.units
        if under is None or under.step == 0:
            return None
        row0 = parent.stores[0][0].rows[0]
        first = np.concatenate([[0], np.cumsum(valid)]).astype(np.int64)
        versions, spans = {}, {}
        for j in range(len(valid)):
            a, b = int(starts[j]), int(starts[j + 1])
            slabs = range((row0 + a) // under.step, (row0 + b - 1) // under.step + 1)
            key = [a, b, int(first[j]), int(valid[j]), [under.versions.get(k) for k in slabs]]
            versions[j] = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]
            spans[j] = (int(first[j]), int(first[j + 1]))
        return Units(0, versions, spans)


def open_origin(
    stores: list[StoredArray],
    arrays: list[np.ndarray],
    token: str,
    description: str,
    missing: str,
    listed: dict | None = None,
    direct: bool = False,
) -> Origin:
    """List every store once (``listed``: listings already made, by array):
    check that it holds every chunk read (with ``missing == "error"``) and
    keep the versions for the identity."""
    listed = {} if listed is None else listed
    out = []
    for stored in stores:
        if id(stored.array) not in listed:
            listed[id(stored.array)] = (stored.array, chunk_versions(stored.array))
        present, versions = listed[id(stored.array)][1]
        if missing == "error":
            check_complete(stored, present, description)
        elif missing == "skip" and (not direct or token.startswith("xarray|")):
            # read through xarray (a dask graph, or a lazily opened array): no
            # reader marks its absent chunks missing
            check_skippable(stored, present, description)
        out.append((stored, versions))
    return Origin(tuple(out), tuple(arrays), token, direct)


def changed_objects(origin: Origin, listed: dict | None = None) -> list[str]:
    """The stored objects under what a signal reads whose version is no longer
    the one its identity was made with (rewritten, or removed, since the store
    was listed), as ``store/key``; empty when none changed or a store keeps no
    versions.  One listing per store (``listed``: those made, by array)."""
    listed = {} if listed is None else listed
    out = []
    for stored, versions in origin.stores:
        if versions is None:
            continue
        if id(stored.array) not in listed:
            listed[id(stored.array)] = chunk_versions(stored.array)[1]
        now = listed[id(stored.array)]
        if now is None:
            continue
        out += [
            f"{stored.where}/{key}"
            for _, key in _objects(stored)
            if versions.get(key) != now.get(key)
        ]
    return out


#: At most this many chunks are read again to find the one that fails.
MAX_PROBES = 64


@dataclass(frozen=True)
class Damaged:
    """A stored chunk that fails to read: its label, the signal's samples in it
    (None when the array's time axis is not known) and its error."""

    label: str
    samples: tuple[int, int] | None
    error: Exception


def find_damaged(
    stores: tuple[StoredArray, ...], start: int, end: int
) -> tuple[Damaged | None, bool]:
    """The first stored chunk under samples ``[start, end)`` that fails to read
    (None if none does), and whether every chunk under them was read again (one
    at a time, at most :data:`MAX_PROBES`; an array whose time axis is not
    known is taken along its first axis)."""
    probes = 0
    for stored in stores:
        array = stored.array
        size, counts = _grid(array)
        ax = 0 if stored.axis is None else stored.axis
        lo, hi = start + stored.rows[0], end + stored.rows[0]
        for coords in np.ndindex(*counts):
            i = coords[ax]
            if not (i * size[ax] < hi and (i + 1) * size[ax] > lo):
                continue
            if probes >= MAX_PROBES:
                return None, False
            probes += 1
            region = tuple(
                slice(c * s, min((c + 1) * s, n))
                for c, s, n in zip(coords, size, array.shape, strict=True)
            )
            try:
                array[region]
            except Exception as exc:  # the chunk at fault
                key = array.metadata.encode_chunk_key(coords)
                samples = None
                if stored.axis is not None:
                    a, b = region[ax].start, region[ax].stop
                    first, last = stored.rows
                    samples = (max(a, first) - first, min(b, last) - first)
                return Damaged(f"chunk {key} of {stored.where}", samples, exc), True
    return None, True


#: Attributes by which xarray decodes stored values (CF conventions).
CF_VALUE_KEYS = ("scale_factor", "add_offset", "missing_value", "_Unsigned", "units")


def cf_attrs(array: Any) -> dict[str, Any]:
    """The attributes xarray decodes a zarr array's values with: its own, with
    the fill value where zarr keeps it (a zarr 2 array written by xarray keeps
    ``_FillValue`` as the array's fill value; zarr 3 a float one base64-encoded)."""
    attrs = {k: v for k, v in dict(array.attrs).items() if k != "_ARRAY_DIMENSIONS"}
    fill = attrs.get("_FillValue", None)
    if fill is None and "_ARRAY_DIMENSIONS" in dict(array.attrs):
        fill = getattr(array.metadata, "fill_value", None)
    if isinstance(fill, str):
        import base64

        fill = np.frombuffer(base64.b64decode(fill), dtype=array.dtype)[0]
    if fill is not None:
        attrs["_FillValue"] = fill
    return attrs


def stored_as_values(array: Any) -> bool:
    """Whether a zarr array's stored numbers are its values: no CF decoding to
    apply (a scale, an offset, a fill value to mask that is not NaN already).
    Otherwise they are read through xarray, which masks fill values as NaN
    instead of passing them off as samples."""
    attrs = dict(array.attrs)
    if any(k in attrs for k in CF_VALUE_KEYS):
        return False
    fill = attrs.get("_FillValue", None)
    if fill is None and "_ARRAY_DIMENSIONS" in attrs:
        # a zarr 2 array written by xarray keeps its _FillValue as the array's
        # fill_value, which xarray masks as it reads
        fill = getattr(array.metadata, "fill_value", None)
    if fill is None:
        return True
    try:
        if isinstance(fill, str):  # xarray stores a zarr 3 float fill value base64-encoded
            import base64

            fill = np.frombuffer(base64.b64decode(fill), dtype=array.dtype)[0]
        return bool(np.isnan(float(fill)))
    except (TypeError, ValueError, IndexError):
        return False

"""Opening zarr stores: the one place the API, the command line and jobs open
a store from a path or URL, with :class:`~kcpstream.InputError` for what
cannot be opened.

* :func:`open_zarr`: the array to segment by path (``segment("x.zarr")``);
* :func:`open_decoded`: a variable through xarray's CF decoding;
* :func:`open_store`: what the command line segments in a store, by path or
  through xarray;
* :func:`open_dataset`: a job's input, a lazily opened xarray Dataset.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, NamedTuple

from kcpstream.errors import InputError, one_line
from kcpstream.inputs.labeled import open_zarr_lazily
from kcpstream.inputs.provenance import stored_as_values

#: Seconds an object store may take to accept a connection, and to answer one
#: read, unless ``storage_options["config_kwargs"]`` say otherwise.  botocore's
#: own defaults (60 s each, retried, and s3fs retries each call 5 times) let an
#: endpoint that accepts connections and never answers hang a call for minutes.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 30


def _check_options(path: str, storage_options: dict | None) -> bool:
    """Whether ``path`` is the URL of an object store; storage options for a
    local path are an error."""
    remote = "://" in path and not path.startswith("file://")
    if not remote and storage_options:
        raise InputError(
            f"storage_options apply to URLs of object stores (s3://, gs://, ...), not to the "
            f"local path {path!r}; omit storage_options"
        )
    return remote


def bounded(path: str, storage_options: dict | None) -> dict | None:
    """The storage options kcpstream opens ``path`` with: the caller's, and for
    an ``s3://`` URL connect and read timeouts of :data:`CONNECT_TIMEOUT` and
    :data:`READ_TIMEOUT` seconds with one attempt per call (s3fs retries the
    call), where ``config_kwargs`` does not set them."""
    if not path.startswith(("s3://", "s3a://")):
        return storage_options
    opts = dict(storage_options or {})
    given = dict(opts.get("config_kwargs") or {})
    defaults = {
        "connect_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
        "retries": {"max_attempts": 1},
    }
    opts["config_kwargs"] = {**defaults, **given}
    return opts


def check_answers(path: str, storage_options: dict | None) -> None:
    """One request to the object store at ``path`` (the store's own entry),
    waited for at most the connect and read timeouts: an endpoint that accepts
    connections and never answers is one :class:`~kcpstream.InputError` then,
    not a call that hangs for minutes.  Any answer, an error included, is left
    to the caller to read."""
    import threading

    import fsspec

    config = (storage_options or {}).get("config_kwargs") or {}
    deadline = float(config.get("connect_timeout", CONNECT_TIMEOUT)) + float(
        config.get("read_timeout", READ_TIMEOUT)
    )

    failed: list[BaseException] = []

    def ask() -> None:
        try:
            fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
            fs.info(root)
        except Exception as exc:  # an answer: the caller's open says what it means
            failed.append(exc)

    asking = threading.Thread(target=ask, name="kcpstream-store-check", daemon=True)
    asking.start()
    asking.join(deadline)
    where = (storage_options or {}).get("endpoint_url") or path
    if asking.is_alive():
        raise InputError(
            f"the object store at {where} did not answer within {deadline:g} s: check "
            "endpoint_url and the network, or give storage_options config_kwargs with a "
            "longer read_timeout for a store that is slow to answer"
        )
    if failed and _unreachable(failed[0]):
        # said here, before zarr's open leaves requests to a store it cannot reach
        # pending (their clean-up at exit printed tracebacks after the error)
        raise InputError(
            f"cannot open {path!r}: the object store at {where} cannot be reached "
            f"({one_line(failed[0], typed=True)}); check endpoint_url and the network"
        )


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says no connection to the store could be made (not that
    the store answered with an error)."""
    return isinstance(exc, ConnectionError) or any(
        kind.__name__ in ("ConnectionError", "EndpointConnectionError", "ClientConnectorError")
        for kind in type(exc).__mro__
    )


def _remote_options(path: str, storage_options: dict | None) -> dict | None:
    """:func:`bounded` options for a URL once the store answered
    (:func:`check_answers`); None for a local path (options refused)."""
    if not _check_options(path, storage_options):
        return None
    opts = bounded(path, storage_options)
    check_answers(path, opts)
    return opts


class Opened(NamedTuple):
    """A zarr array opened by path (:func:`open_zarr`)."""

    array: Any
    description: str
    group: Any  # the group it is in (None: a store that is one array)
    group_path: str | None
    name: str | None  # its name in the group


def open_zarr(
    path: str | os.PathLike, variable: str | None, storage_options: dict | None = None
) -> Opened:
    """The zarr array at ``path`` (``variable`` in a group), its description, the
    group it is in, that group's path and the array's name in it (None for a
    store that is one array).

    A ``path`` down to an array in a group (``"archive.zarr/pressure"``) is
    the group's array ``"pressure"``: its time coordinate and its CF
    attributes are the group's, as with ``variable="pressure"``."""
    import zarr

    path_str = os.fspath(path)
    options = _remote_options(path_str, storage_options)
    _check_exists(path_str)
    try:
        kwargs = {"storage_options": options} if options else {}
        node = zarr.open(path_str, mode="r", **kwargs)
    except Exception as exc:  # zarr raises several types for unreadable stores
        local = "://" not in path_str  # (a URL's store may be absent, or the URL wrong)
        if local and type(exc).__name__ in ("GroupNotFoundError", "NodeNotFoundError"):
            raise InputError(
                f"{path_str!r} holds no zarr array or group (no zarr.json, .zarray or "
                ".zgroup at its top): give the path of the store itself"
            ) from None
        raise InputError(
            f"cannot open {path_str!r} as a zarr store: {one_line(exc, typed=True)}"
        ) from exc
    if isinstance(node, zarr.Array):
        if variable is not None:
            raise InputError(
                f"{path_str!r} is a single zarr array, so variable={variable!r} does not apply; "
                "omit variable"
            )
        return Opened(node, path_str, *_parent_group(path_str, node, kwargs))
    names = sorted(node.array_keys())
    if variable is None:
        if len(names) == 1:
            variable = names[0]
        else:
            raise InputError(
                f"the zarr group {path_str!r} holds {len(names)} arrays "
                f"({', '.join(names) or 'none'}); "
                "choose one with variable=<name> (--variable on the command line)"
            )
    try:
        arr = node[variable]
    except KeyError:
        raise InputError(
            f"the zarr group {path_str!r} has no array {variable!r}; "
            f"available arrays: {', '.join(names) or 'none'}"
        ) from None
    if not isinstance(arr, zarr.Array):
        raise InputError(f"{variable!r} in {path_str!r} is a group, not an array")
    return Opened(arr, f"{path_str}/{variable}", node, path_str, variable)


def _parent_group(path: str, array: Any, kwargs: dict) -> tuple[Any, str | None, str | None]:
    """``(group, its path, name)``: the zarr group holding the array at ``path``
    under its last name; ``(None, None, None)`` when the folder above is no
    such group (a store that is one array)."""
    import zarr

    head, _, name = path.rstrip("/").rpartition("/")
    if not head or not name or head.endswith(":/"):
        return None, None, None
    try:
        group = zarr.open_group(head, mode="r", **kwargs)
        if name in group.array_keys() and group[name].shape == array.shape:
            return group, head, name
    except Exception:  # no group above it (or not one that can be read): the array alone
        pass
    return None, None, None


def open_decoded(path: str, name: str, storage_options: dict | None) -> Any:
    """Variable ``name`` of a store through xarray's CF decoding, without loading
    the time index where xarray allows it."""
    try:
        return open_zarr_lazily(path, bounded(path, storage_options))[name]
    except Exception as exc:
        what = f"cannot decode {path!r}/{name} (CF attributes) with xarray"
        raise InputError(f"{what}: {one_line(exc, typed=True)}") from exc


def open_store(
    path: str,
    variable: str | None,
    dim: str | None,
    storage_options: dict | None = None,
    batch: bool = False,
    variables: list[str] | None = None,
):
    """What to segment in a zarr store, as ``(data, variable)``: ``variable``,
    the ``variables`` segmented together, or every variable along time.

    One array whose values are stored as they are is segmented by path: its
    time coordinate is then read only at the change-points.  Several
    variables, batch dimensions, or CF-encoded values (scale factors, fill
    values to mask) go through xarray, opened without loading the time
    index where xarray allows it; a store not written with dimension names
    is segmented by path as plain zarr arrays."""
    import zarr

    options = _remote_options(path, storage_options)
    _check_exists(path)
    if variable is not None and variables:
        raise InputError("give one variable (--variable) or several (--variables), not both")
    with warnings.catch_warnings():  # zarr's notes on consolidated metadata
        warnings.simplefilter("ignore")
        try:
            node = zarr.open(path, mode="r", storage_options=options)
        except Exception:  # let segment() say what is wrong with the store
            return path, variable
    if isinstance(node, zarr.Array) or not list(node.array_keys()):
        if variables:
            raise InputError(
                f"the store {path!r} holds no variables to choose from (--variables names "
                "arrays of a group)"
            )
        return path, variable
    time_dim = dim or "time"
    arrays = {name: node[name] for name in node.array_keys()}

    def dims(a) -> tuple:
        names = getattr(a.metadata, "dimension_names", None) or a.attrs.get("_ARRAY_DIMENSIONS")
        return tuple(names or ())

    if variables:
        names = list(dict.fromkeys(variables))
    elif variable is None:
        coords = {n for n, a in arrays.items() if dims(a) == (n,)}
        names = [n for n, a in arrays.items() if n not in coords and time_dim in dims(a)]
        data_vars = {n: dims(a) for n, a in arrays.items() if n not in coords and dims(a)}
        if not names and data_vars and len(arrays) > 1:
            # written with dimension names, none of them time_dim, beside other
            # arrays (coordinates) that a choice of variable would only offer
            # (one array alone is segmented by path, whatever its dimension)
            raise _no_time_variable(path, time_dim, dim is None, data_vars)
        if not names:
            return path, variable
    else:
        names = [variable]
    for name in names:
        if name not in arrays:
            raise InputError(
                f"the store {path!r} has no variable {name!r}; its arrays are "
                f"{', '.join(sorted(arrays)) or 'none'}"
            )
    bare = next((name for name in names if not dims(arrays[name])), None)
    if batch and bare is not None:
        raise InputError(
            f"batch_dims needs dimension names, and the array {bare!r} of {path!r} has "
            "none (a store not written by xarray): segment its series one by one"
        )
    if len(names) == 1 and not batch and not dims(arrays[names[0]]):
        return path, names[0]  # no dimension names: xarray cannot open it, zarr can
    if (
        len(names) == 1
        and not batch
        and dims(arrays[names[0]])[:1] == (time_dim,)
        and stored_as_values(arrays[names[0]])
    ):
        return path, names[0]
    ds = open_zarr_lazily(path, options)
    return (ds[names[0]] if len(names) == 1 else ds[names]), None


def opened_from(data, variable, variables, dim) -> dict | None:
    """A path or URL given as the input, with what was read of it (the
    ``variable``, ``variables`` and ``dim`` arguments), as a result records it
    to open the store again; None for any other input."""
    if not isinstance(data, str | os.PathLike):
        return None
    listed = None if variables is None else list(variables)
    return {"path": os.fspath(data), "variable": variable, "variables": listed, "dim": dim}


def _no_time_variable(path: str, time_dim: str, default: bool, data_vars: dict) -> InputError:
    """The error for a store none of whose variables ``data_vars`` (name ->
    dimensions) has ``time_dim`` (the ``default`` one, or given as ``dim=``)."""
    listed = ", ".join(f"{n} ({', '.join(d)})" for n, d in sorted(data_vars.items()))
    fix = (
        "choose the time dimension with dim=<name> (--dim on the command line)"
        if default
        else "choose one of theirs"
    )
    return InputError(
        f"no variable of the store {path!r} has the dimension {time_dim!r} "
        f"(its variables: {listed}); {fix}"
    )


def store_input(data, reading: dict, batch: bool, storage_options):
    """What a path or URL stands for, as the command line reads it
    (:func:`~kcpstream.inputs.stores.open_store`): ``variable``, the
    ``variables`` segmented together, or, for a group given neither, every
    variable along time together (as ``xr.open_zarr(path)`` is segmented).
    ``(data, storage_options)``, ``reading`` updated in place."""
    if not isinstance(data, str | os.PathLike) or not (
        batch or reading["variables"] or reading["variable"] is None
    ):
        return data, storage_options
    path = os.fspath(data)
    opened, variable = open_store(
        path,
        reading["variable"],
        reading["dim"],
        storage_options,
        batch=batch,
        variables=list(reading["variables"] or ()),
    )
    if isinstance(opened, str):
        reading["variable"] = variable
        return opened, storage_options
    # an xarray object holding just what was asked for: read through it
    reading["variable"], reading["variables"] = None, None
    return opened, None


def _check_exists(path: str) -> None:
    """A local path that names nothing is refused before zarr makes a guess of it."""
    if "://" not in path and not os.path.exists(path):
        raise InputError(f"no zarr store at {path!r}: check the path")


def open_dataset(store: str, variables: list[str] | None, storage_options: dict | None = None):
    """A job's input: the store as an xarray Dataset opened lazily (no time index
    loaded), restricted to ``variables`` when given."""
    options = _remote_options(store, storage_options)
    if "://" not in store and not os.path.exists(store):
        raise InputError(f"store {store!r} does not exist")
    try:
        ds = open_zarr_lazily(store, options)
    except Exception as exc:
        raise InputError(f"cannot open {store!r} as an xarray zarr store: {exc}") from None
    if variables:
        missing = [v for v in variables if v not in ds.data_vars]
        if missing:
            raise InputError(
                f"the store has no variable {missing[0]!r}; "
                f"its variables are {', '.join(map(str, ds.data_vars))}"
            )
        ds = ds[variables]
    return ds

"""Checkpoints: block statistics and exact refinement results kept in a folder.

A checkpoint directory holds one *group* (a folder of ``.npy`` arrays and a
JSON file of attributes, :data:`ATTRS`) per *fingerprint* of

* the input's identity (:mod:`kcpstream.inputs.provenance`: the array's metadata
  and the version of every chunk of a zarr store, a hash of an in-memory
  array's bytes) and its kind, shape and dtype;
* the fitted feature map (its JSON);
* the block size.

The chunking is deliberately not part of it: the feature sums are exact
integers, the same for every chunking (a block cut by a chunk boundary sums
its squared norms and its bridge bound in two parts, so those can differ by a
rounding: costs in the last bit, never the gains that place a split).  A second run on the same
input with another ``pen``, ``n_bkps`` or ``method`` loads the statistics
(no data pass) and the segments already evaluated exactly (no refinement
read it has made before).  A changed input (a chunk rewritten in place, an
append, another codec) or parameter gives another fingerprint: a stale
checkpoint is never used.

A group also keeps the *lineage* of a stored input (which array, how it is
stored; not its length or chunk versions) and the version of each run of
its chunks along time: a later call on a changed version of the same array
keeps the statistics of the unchanged blocks (:mod:`kcpstream.persist.reuse`) and
replaces the group with its own.  With them it keeps the record of the fit
(:mod:`kcpstream.engine.fitting`: the fitted map and the windows of samples it was
fitted on, which a later version's fit on the same samples takes as it is)
and the samples refinement scanned for the segments that end at the
series' end (which an append makes longer) or at their splits (which it
may move: ``kept_*``, see :func:`kcpstream.persist.reuse.kept_pieces`).

A group is a plain folder rather than a zarr group because it is a local,
private cache that is read and written whole: a zarr array's metadata round
trips cost more than its bytes, and an update pays both (figures in
``benchmarks/results/design.md``).

The prefix sums, most of a group's bytes, are stored in slabs of
:data:`PREFIX_SLAB_BYTES` (4096 blocks at 64 features).  A group written
from the statistics of another (an update's, from the group of the earlier
version; a run that loaded a group, from it) hard-links each slab whose
content is the other's, instead of writing, hashing and flushing it again:
after an append at 10^8 samples, all but the last two of seven.

Every array is stored with a SHA-256 of its dtype, shape and bytes, and the
attributes with one of their own, checked on load; a group that is missing
a piece, fails its checksums or does not fit the series is a cache miss
(recomputed and written again), never data.
Writes are atomic: the group is written and flushed to disk under a temporary
name in the same directory and then renamed, so a killed run leaves the
previous checkpoint (or none), never half of one; the next save removes the
temporary folders that killed runs left.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kcpstream._version import __version__
from kcpstream.errors import InputError
from kcpstream.persist.files import check_writable as check_path_writable
from kcpstream.persist.files import fsync_dir, write_atomic
from kcpstream.search.binseg import SegmentSplit
from kcpstream.search.stats import BlockStats

#: Bumped whenever the stored layout changes (older checkpoints are then not used).
FORMAT = 5

#: Bytes of prefix sums per file: ``prefix.<i>.npy`` holds the columns
#: ``[i * w, (i + 1) * w)`` for ``w`` = :func:`slab_columns`.  An update after
#: an append changes the last few, and the others are linked from the group
#: it updates (at 64 features, 4096 blocks a slab).
PREFIX_SLAB_BYTES = 2 * 2**20


def slab_columns(n_features: int) -> int:
    """Columns of the prefix sums of ``n_features`` features per slab file."""
    return max(1, PREFIX_SLAB_BYTES // (8 * max(1, n_features)))


#: The file of a group's attributes (its arrays are ``<name>.npy`` beside it).
ATTRS = "attrs.json"

#: Temporary folders of another machine's runs older than this are removed.
STALE_SECONDS = 24 * 3600


def fingerprint(
    identity: str,
    source: dict[str, Any],
    fmap_json: str,
    block_size: int,
    tile: int | None = None,
    pass_chunk: int | None = None,
) -> str:
    """A stable hash of what the statistics depend on, to the bit.

    ``tile``: the samples featurized together, when blocks are longer (a
    block's sums of squares are then merged from its tiles' pieces, one
    rounding apart for another tile); None otherwise.  ``pass_chunk``: the
    data pass's chunk length, when blocks hold more than one sample (a block
    cut by a chunk boundary is merged from the two chunks' parts, and where
    tiles start depends on where chunks do); None otherwise."""
    ident = {k: v for k, v in source.items() if k in ("kind", "shape", "dtype", "window")}
    key = {"format": FORMAT, "source": ident, "block_size": block_size, "identity": identity}
    if tile is not None:
        key["tile"] = tile
    if pass_chunk is not None:
        key["pass_chunk"] = pass_chunk
    h = hashlib.sha256()
    h.update(json.dumps(key, sort_keys=True).encode())
    h.update(fmap_json.encode())
    return h.hexdigest()[:32]


def _checksum(value: np.ndarray) -> str:
    value = np.ascontiguousarray(value)
    h = hashlib.sha256(json.dumps([value.dtype.str, list(value.shape)]).encode())
    h.update(memoryview(value).cast("B") if value.size else b"")
    return h.hexdigest()


def _local_dir(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if "://" in path:
        raise ValueError(
            f"checkpoint={path!r}: checkpoints are written atomically to a local directory; "
            "give a local path"
        )
    return path


def check_writable(path: str | os.PathLike) -> None:
    """Raise :class:`~kcpstream.errors.InputError` now, before any work, when
    the checkpoint directory cannot be created or written (or is a URL)."""
    try:
        root = _local_dir(path)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    check_path_writable(root, folder=True, label=f"checkpoint={root!r}")


#: Gap records kept (the newest) of inputs read from no versioned store: a
#: record is small, and one per version of an input.
GAP_RECORDS = 16
#: Gap records kept (the newest) of stored arrays: one per array (its lineage),
#: replaced by each version's, so a batch of sensors keeps one each.
LINEAGE_GAP_RECORDS = 4096


def _gaps_path(path: str | os.PathLike, name: str) -> str:
    return os.path.join(_local_dir(path), "gaps", f"{name}.json")


def load_gaps(path: str | os.PathLike, identity: str, lineage: str | None = None):
    """Where an input's missing samples are (:meth:`kcpstream.inputs.gaps.GapMap.to_dict`),
    as a run on the very same samples (``identity``) kept them, or None.

    With ``lineage`` (a stored array's, see
    :attr:`kcpstream.inputs.provenance.Origin.lineage`), the record an earlier
    version of the array left is returned too: its ``"identity"`` says which
    version, and its ``"slab_step"`` and ``"slabs"`` the versions of the
    stored objects it was read from (the caller keeps the chunks that did
    not change)."""
    if lineage is not None:
        record = _load_record(_gaps_path(path, f"lineage-{lineage[:32]}"), "lineage", lineage)
        if record is not None:
            return record
    return _load_record(_gaps_path(path, identity[:32]), "identity", identity)


def _load_record(where: str, field: str, value: str) -> dict[str, Any] | None:
    try:
        with open(where) as f:
            record = json.load(f)
    except (OSError, ValueError):  # none, or damaged: found again by reading
        return None
    if not isinstance(record, dict) or record.get(field) != value:
        return None
    # a record damaged into other valid JSON (a digit changed) would map the
    # change-points to the wrong samples: its checksum says so, and it is
    # found again by reading
    digest = record.pop("sha256", None)
    if digest != _record_digest(record):
        return None
    return record


def _record_digest(record: dict[str, Any]) -> str:
    """SHA-256 of a gap record's canonical JSON."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def save_gaps(
    path: str | os.PathLike,
    identity: str,
    record: dict[str, Any],
    lineage: str | None = None,
    units: tuple[int, dict[int, str]] | None = None,
) -> None:
    """Keep an input's gap record for later runs on the same samples.  With
    ``lineage`` and ``units`` (``(step, versions)`` of the stored objects it
    was read from), it replaces the record of the array's earlier version,
    and a later version keeps what did not change (:func:`load_gaps`);
    without, the :data:`GAP_RECORDS` newest records are kept."""
    body = {**record, "identity": identity}
    if lineage is not None and units is not None:
        step, versions = units
        body.update(lineage=lineage, slab_step=step, slabs={str(k): v for k, v in versions.items()})
        where = _gaps_path(path, f"lineage-{lineage[:32]}")
        keep, stored = LINEAGE_GAP_RECORDS, True
    else:
        where = _gaps_path(path, identity[:32])
        keep, stored = GAP_RECORDS, False
    folder = os.path.dirname(where)
    os.makedirs(folder, exist_ok=True)
    write_atomic(where, json.dumps({**body, "sha256": _record_digest(body)}))
    with os.scandir(folder) as found:  # (names only: a batch saves one record per series)
        names = [
            e.path
            for e in found
            if e.name.endswith(".json") and e.name.startswith("lineage-") == stored
        ]
    if len(names) <= keep:
        return
    entries = []
    for name in names:
        try:
            entries.append((os.stat(name).st_mtime_ns, name))
        except OSError:
            pass
    for _, old in sorted(entries, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            os.remove(old)


@dataclass(frozen=True)
class Loaded:
    """What :func:`load` found under a key: the statistics, the exact segments
    stored for the ``min_size`` asked (none for another), the group's attributes."""

    stats: BlockStats
    known: dict
    attrs: dict


@dataclass(frozen=True)
class Damaged:
    """:func:`load` found a group under the key that cannot be used: the caller
    recomputes the statistics and writes them again."""

    key: str


def load(path: str | os.PathLike, key: str, min_size: int, n: int, block_size: int):
    """The group stored under ``key`` (:class:`Loaded`); None when there is
    none; :class:`Damaged` when it is there but incomplete, fails its
    checksums or does not fit a series of ``n`` samples in blocks of
    ``block_size`` (or of one sample: an in-memory search's).

    A segment's best split depends on ``min_size`` (the splits it admits),
    which the key does not hold: the segments are returned only when they
    were stored for the same ``min_size`` (none otherwise; the statistics
    hold for every ``min_size``).

    Returns
    -------
    Loaded, Damaged or None
    """
    where = os.path.join(_local_dir(path), key)
    if not os.path.isdir(where):
        return None
    try:
        stats, known, _, attrs = _read(where, key, min_size, n, block_size)
    except Exception:  # a missing file, a codec error, a mismatch: all the same miss
        return Damaged(key)
    return Loaded(stats, known, attrs)


@dataclass(frozen=True)
class Base:
    """What a checkpoint group keeps of an earlier version of a stored input.

    Attributes
    ----------
    key : str
        The group's fingerprint.
    stats : BlockStats
        Its statistics.
    known : dict
        Its exact segments, as :func:`load` gives them for the ``min_size`` asked.
    attrs : dict
        The group's attributes.
    slabs : dict of int to str
        The versions of the stored objects the statistics were computed from
        (checksummed like the statistics).
    kept : dict of (int, int) to numpy.ndarray
        Samples ``[a, b)`` of that version that refinement scanned for the
        segments ending at its last sample or at their splits
        (:func:`kcpstream.persist.reuse.kept_pieces`): the segments an append makes
        new scan them again.
    """

    key: str
    stats: BlockStats
    known: dict
    attrs: dict
    slabs: dict
    kept: dict


def load_base(
    path: str | os.PathLike, lineage: str, features: str, block_size: int, min_size: int
) -> Base | None:
    """The newest intact statistics stored for an earlier version of the input
    of ``lineage`` (:attr:`kcpstream.inputs.provenance.Origin.lineage`) with the
    same fitted feature map (JSON ``features``) and blocks of ``block_size``,
    or None."""
    for name, where, attrs in _groups_of(path, lineage):
        try:
            if attrs.get("features") != features or attrs.get("block_size") != block_size:
                continue
            # the attributes the arrays were checked against (the group may have
            # been replaced since the look above)
            stats, known, arrays, attrs = _read(where, name, min_size, None, block_size, kept=True)
            slabs = _slabs_of(arrays)
        except Exception:  # damaged, being replaced, or without versions: not a base
            continue
        same = attrs.get("features") == features and attrs.get("lineage") == lineage
        if same and stats.block_size == block_size:
            return Base(name, stats, known, attrs, slabs, _kept_of(arrays))
    return None


def _groups_of(path: str | os.PathLike, lineage: str, series: bool = False):
    """``(key, folder, attrs)`` of the groups stored for inputs of ``lineage``
    (with ``series``, also for the windows of such an input), newest first."""
    root = _local_dir(path)
    listing = _held_listing(root)
    if listing is not None:
        yield from listing.of(lineage, series)
        return
    for name, where, attrs in _list_groups(root):
        if attrs.get("lineage") == lineage or (series and attrs.get("series_lineage") == lineage):
            yield name, where, attrs


def _list_groups(root: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(key, folder, attrs)`` of every readable group in ``root``, newest first
    (each group's attributes read as it comes)."""
    groups = []
    try:
        for entry in os.scandir(root):
            if re.fullmatch(r"[0-9a-f]{32}", entry.name):
                try:
                    groups.append((-entry.stat().st_mtime_ns, entry.name, entry.path))
                except OSError:  # replaced by another run meanwhile
                    pass
    except FileNotFoundError:
        return
    for _, name, where in sorted(groups):
        try:
            attrs = read_attrs(where)
        except Exception:  # damaged, or being replaced
            continue
        yield name, where, attrs


class _Listing:
    """The groups of one checkpoint folder, listed and their attributes read
    once while a call holds the folder (:func:`listed`), indexed by lineage,
    and kept up to date with the call's own saves and removals.

    A batch of a thousand series looks up each one's earlier versions and fit
    records and removes its outdated groups: listing the folder for each made
    that quadratic in the series (``benchmarks/results/throughput.md``).
    Groups other processes write or remove meanwhile are not seen, as if the
    folder were listed when the call began; everything a group gives is checked
    when it is read (its checksums), so a group gone or replaced since is a
    miss, never data."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.lock = threading.Lock()
        # key -> (rank, folder, attrs), the newest of the lowest rank; and the
        # keys of each lineage and of each series' lineage (a windows' group)
        self.groups: dict[str, tuple[int, str, dict[str, Any]]] | None = None
        self.index: dict[tuple[str, Any], set[str]] = {}
        self.newest = 0
        self.cleaned = False
        self.holders = 0  # the blocks of :func:`listed` holding it

    def _add(self, name: str, rank: int, where: str, attrs: dict[str, Any]) -> None:
        self.groups[name] = (rank, where, attrs)
        for field in ("lineage", "series_lineage"):
            value = attrs.get(field)
            if isinstance(value, str):
                self.index.setdefault((field, value), set()).add(name)

    def _drop(self, name: str) -> None:
        _, _, attrs = self.groups.pop(name)
        for field in ("lineage", "series_lineage"):
            self.index.get((field, attrs.get(field)), set()).discard(name)

    def of(self, lineage: str, series: bool) -> list[tuple[str, str, dict[str, Any]]]:
        with self.lock:
            if self.groups is None:
                self.groups = {}
                for rank, (name, where, attrs) in enumerate(_list_groups(self.root)):
                    self._add(name, rank, where, attrs)
            names = set(self.index.get(("lineage", lineage), ()))
            if series:
                names |= self.index.get(("series_lineage", lineage), set())
            found = sorted(self.groups[name][:2] + (name,) for name in names)
            return [(name, where, self.groups[name][2]) for _, where, name in found]

    def saved(self, name: str, where: str) -> None:
        """The group ``name`` was written (the newest): its attributes as stored."""
        try:
            attrs = read_attrs(where)
        except Exception:  # replaced meanwhile: as if not seen
            attrs = None
        with self.lock:
            if self.groups is None:
                return
            if name in self.groups:
                self._drop(name)
            if attrs is not None:
                self.newest -= 1
                self._add(name, self.newest, where, attrs)

    def touched(self, name: str) -> None:
        """The group ``name`` was used as it is: now the newest."""
        with self.lock:
            if self.groups is not None and name in self.groups:
                _, where, attrs = self.groups[name]
                self.newest -= 1
                self.groups[name] = (self.newest, where, attrs)

    def removed(self, name: str) -> None:
        with self.lock:
            if self.groups is not None and name in self.groups:
                self._drop(name)


_LISTINGS: dict[str, _Listing] = {}
_LISTINGS_LOCK = threading.Lock()


def _held_listing(root: str) -> _Listing | None:
    with _LISTINGS_LOCK:
        return _LISTINGS.get(os.path.abspath(root))


@contextlib.contextmanager
def listed(path: str | os.PathLike):
    """Within the block, the groups of the checkpoint folder ``path`` are
    listed once (:class:`_Listing`), however many series look them up; a
    block entered while another holds the folder (an inner one, or another
    thread's call) shares its listing."""
    root = os.path.abspath(_local_dir(path))
    with _LISTINGS_LOCK:
        listing = _LISTINGS.get(root)
        if listing is None:
            listing = _LISTINGS[root] = _Listing(root)
        listing.holders += 1  # (calls in several threads may hold one folder)
    try:
        yield
    finally:
        with _LISTINGS_LOCK:
            listing.holders -= 1
            if not listing.holders:
                _LISTINGS.pop(root, None)


def stored_fits(path: str | os.PathLike, lineage: str):
    """``(record, step, slabs)`` of every group stored for an input of
    ``lineage``, or for the windows of one (``"series_lineage"``), that keeps
    the record of its fit (a dict, see :class:`kcpstream.engine.fitting.FitRecord`),
    newest first: ``slabs`` maps each slab of ``step`` rows to the hash of its
    objects' versions (checksummed)."""
    for _, where, attrs in _groups_of(path, lineage, series=True):
        if "fit" not in attrs or "slab_step" not in attrs:
            continue
        # the record says what was read, not how it was fitted: only the fit
        # of this very release (and layout) is the one it would make
        if attrs.get("format") != FORMAT or attrs.get("kcpstream") != __version__:
            continue
        if attrs.get("fit_checksum") != _record_checksum(attrs["fit"]):
            continue
        try:
            arrays = {name: read_array(where, name) for name in ("slab_index", "slab_version")}
            if any(_checksum(v) != attrs["checksums"][k] for k, v in arrays.items()):
                continue
        except Exception:  # damaged, or being replaced: not a record
            continue
        yield attrs["fit"], int(attrs["slab_step"]), _slabs_of(arrays)


def _slabs_of(arrays: dict[str, np.ndarray]) -> dict[int, str]:
    """The slab versions :func:`save` stored (``slab_index``, ``slab_version``)."""
    return {
        int(i): bytes(v).hex()
        for i, v in zip(arrays["slab_index"], arrays["slab_version"], strict=True)
    }


def _record_checksum(record: Any) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _kept_of(arrays: dict[str, np.ndarray]) -> dict[tuple[int, int], np.ndarray]:
    """The samples :func:`save` kept (``kept_bounds``, ``kept_samples``), by piece."""
    if "kept_bounds" not in arrays:
        return {}
    bounds, values = arrays["kept_bounds"], arrays["kept_samples"]
    ends = np.cumsum(bounds[:, 1] - bounds[:, 0])
    starts = ends - (bounds[:, 1] - bounds[:, 0])
    return {
        (int(a), int(b)): values[int(lo) : int(hi)]
        for (a, b), lo, hi in zip(bounds, starts, ends, strict=True)
    }


def remove(path: str | os.PathLike, key: str) -> None:
    """Remove the group ``key`` (atomically out of sight first), if present."""
    root = _local_dir(path)
    final = os.path.join(root, key)
    if os.path.isdir(final):
        old = _temp_name(root, key, "old")
        try:
            os.replace(final, old)
        except OSError:  # removed or replaced meanwhile
            return
        finally:
            listing = _held_listing(root)
            if listing is not None:
                listing.removed(key)
        shutil.rmtree(old, ignore_errors=True)


def touch(path: str | os.PathLike, key: str) -> None:
    """Make the group ``key``, used as it is and not written again, the newest
    of the folder (its modification time now): lookups of a lineage take its
    groups newest first, as when a run that used a group wrote it again."""
    root = _local_dir(path)
    try:
        os.utime(os.path.join(root, key))
    except OSError:  # removed meanwhile
        return
    listing = _held_listing(root)
    if listing is not None:
        listing.touched(key)


def remove_outdated(path: str | os.PathLike, lineage: str) -> None:
    """Remove the groups of inputs of ``lineage`` written in another layout
    (:data:`FORMAT`): no run of this release uses them."""
    for name, _, attrs in list(_groups_of(path, lineage)):
        if attrs.get("format") != FORMAT:
            remove(path, name)


class _Damaged(Exception):
    pass


def read_attrs(where: str) -> dict[str, Any]:
    """The attributes of the group in folder ``where``, checked against the
    SHA-256 :func:`write_attrs` stored with them (a changed digit of a
    ``min_size`` would otherwise pass for another setting)."""
    with open(os.path.join(where, ATTRS), encoding="utf-8") as fh:
        attrs = json.load(fh)
    if not isinstance(attrs, dict) or attrs.pop(_ATTRS_SUM, None) != _attrs_checksum(attrs):
        raise _Damaged(ATTRS)
    return attrs


def as_written(attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` as :func:`write_attrs` stores them (and :func:`read_attrs` gives
    them back): JSON's lists for tuples, Python numbers for numpy's."""
    return json.loads(json.dumps(attrs, default=_plain))


def write_attrs(where: str, attrs: dict[str, Any]) -> None:
    """Write the attributes of the group in folder ``where`` with their
    checksum (not atomically: :func:`save` writes a group under a temporary
    name)."""
    attrs = as_written(attrs)  # as they will be read
    with open(os.path.join(where, ATTRS), "w", encoding="utf-8") as fh:
        json.dump({**attrs, _ATTRS_SUM: _attrs_checksum(attrs)}, fh)


#: The key of the attributes' own checksum in :data:`ATTRS`.
_ATTRS_SUM = "attrs_checksum"


def _attrs_checksum(attrs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(attrs, sort_keys=True).encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A numpy scalar (a block size, a min_size) as the Python number it is."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def read_array(where: str, name: str) -> np.ndarray:
    """Array ``name`` of the group in folder ``where`` (its checksum unchecked)."""
    return np.load(os.path.join(where, f"{name}.npy"), allow_pickle=False)


def _read(where: str, key: str, min_size: int, n: int | None, block_size: int, kept: bool = False):
    """The group's statistics, exact segments, arrays (the samples it kept
    only with ``kept``: a later version's update scans them, a load of this
    very version does not) and attributes."""
    attrs = read_attrs(where)
    if attrs.get("format") != FORMAT or attrs.get("fingerprint") != key:
        raise _Damaged("format")
    sums = attrs["checksums"]
    names = [name for name in sums if kept or not name.startswith("kept_")]
    arrays = {name: read_array(where, name) for name in names}
    for name, value in arrays.items():
        if _checksum(value) != sums[name]:
            raise _Damaged(name)
    stats = BlockStats.from_arrays(
        _joined({k: v for k, v in arrays.items() if not k.startswith(("seg_", "slab_", "kept_"))})
    )
    # an in-memory search stores one block per sample under the same key
    if (n is not None and stats.n != n) or stats.block_size not in (1, block_size):
        raise _Damaged("size")
    blocks = -(-stats.n // stats.block_size)
    if stats.prefix.shape[1] != blocks + 1 or len(stats.block_q) != blocks:
        raise _Damaged("shape")
    known: dict[tuple[int, int], SegmentSplit] = {}
    if attrs.get("min_size") != min_size:
        return stats, known, arrays, attrs
    for row, piece in zip(arrays["seg_bounds"], arrays["seg_piece"], strict=True):
        start, end, split = (int(v) for v in row[:3])
        seg = SegmentSplit(start, end, split=split)
        seg.gain = seg.upper = float(arrays["seg_gain"][len(known)])
        if piece[0] >= 0:
            seg.piece = (int(piece[0]), int(piece[1]))
            seg.left = stats._pieces.get((seg.piece[0], split))
            seg.right = stats._pieces.get((split, seg.piece[1]))
        known[(start, end)] = seg
    return stats, known, arrays, attrs


def _sliced(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:meth:`BlockStats.to_arrays` with the prefix sums in slabs of columns
    (``prefix.<i>``, :func:`slab_columns` each)."""
    out = {k: v for k, v in arrays.items() if k != "prefix"}
    prefix = arrays["prefix"]
    width = slab_columns(prefix.shape[0])
    for i, c0 in enumerate(range(0, prefix.shape[1], width)):
        out[f"prefix.{i}"] = prefix[:, c0 : c0 + width]
    return out


def _joined(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inverse of :func:`_sliced`."""
    slabs = sorted((int(k.split(".")[1]), v) for k, v in arrays.items() if k.startswith("prefix."))
    if [i for i, _ in slabs] != list(range(len(slabs))) or not slabs:
        raise _Damaged("prefix")
    out = {k: v for k, v in arrays.items() if not k.startswith("prefix.")}
    out["prefix"] = np.concatenate([v for _, v in slabs], axis=1)
    return out


def _linked(
    where: str, name: str, value: np.ndarray, other: str, other_arrays: dict, other_sums: dict
) -> str | None:
    """Hard-link array ``name`` of the group in folder ``other`` (in memory
    ``other_arrays``, checksums ``other_sums``: what its files held when read)
    as that of the group being written in ``where``, when ``value`` is the
    same array.  Returns its checksum, or None (not linked: write it)."""
    before = other_arrays.get(name)
    digest = other_sums.get(name)
    if before is None or digest is None or before.dtype != value.dtype:
        return None
    if before.shape != value.shape or not np.array_equal(before, value):
        return None
    try:
        os.link(os.path.join(other, f"{name}.npy"), os.path.join(where, f"{name}.npy"))
    except OSError:  # gone meanwhile, or a file system without hard links
        return None
    return digest


def _fsync_tree(folder: str, skip: frozenset[str] = frozenset()) -> None:
    """Flush every file and folder under ``folder`` to disk (before the rename
    that publishes it: a crash then leaves the old checkpoint or the new one),
    but the files ``skip`` (links to files flushed when they were written)."""
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name in skip:
                continue
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def _temp_name(root: str, key: str, kind: str) -> str:
    return os.path.join(
        root, f".{key}.{kind}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex}"
    )


_LEFTOVER = re.compile(r"^\.[0-9a-f]+\.(tmp|old)-(?P<host>.*)-(?P<pid>\d+)-[0-9a-f]{32}$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def tidy(path: str | os.PathLike) -> None:
    """Remove the temporary folders killed runs left in the checkpoint folder
    ``path`` (:func:`_clean_leftovers`): before each save, or once while a
    call holds the folder (:func:`listed`: each look scans the folder)."""
    root = _local_dir(path)
    listing = _held_listing(root)
    if listing is not None and listing.cleaned:
        return
    if os.path.isdir(root):
        _clean_leftovers(root)
    if listing is not None:
        listing.cleaned = True


def _clean_leftovers(root: str) -> None:
    """Remove the temporary folders of runs that were killed: this machine's
    whose process is gone, other machines' after :data:`STALE_SECONDS`."""
    host = socket.gethostname()
    now = time.time()
    for entry in os.scandir(root):
        if not entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        match = _LEFTOVER.match(entry.name)
        if match is None:
            continue
        owner, pid = match["host"], match["pid"]
        try:
            dead = (
                not _alive(int(pid))
                if owner == host
                else now - entry.stat().st_mtime > STALE_SECONDS
            )
        except (ValueError, OSError):
            continue
        if dead:
            shutil.rmtree(entry.path, ignore_errors=True)


def _publish(root: str, key: str, tmp: str, final: str) -> None:
    """Rename the written group ``tmp`` to ``final``, moving a group already
    there out of sight first (and removing it once ``tmp`` is in place).
    Other processes may save or remove the same key meanwhile (the group
    seen may be gone before it is moved, or another be back before the
    rename): each step is tried again, up to :data:`_PUBLISH_TRIES` times."""
    moved: list[str] = []
    try:
        for _ in range(_PUBLISH_TRIES):
            if os.path.isdir(final):
                old = _temp_name(root, key, "old")
                try:
                    os.replace(final, old)
                    moved.append(old)
                except FileNotFoundError:  # moved away by another save meanwhile
                    continue
            try:
                os.replace(tmp, final)
                return
            except OSError as exc:  # another save put its group there meanwhile
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EACCES, errno.EPERM):
                    raise
                if not os.path.isdir(final):
                    raise
        raise OSError(f"checkpoint group {final!r} kept being replaced by other runs")
    finally:
        for old in moved:
            shutil.rmtree(old, ignore_errors=True)


def _like(root: str, like: tuple[str, np.ndarray, dict] | None):
    """``(folder, arrays, checksums)`` of the group :func:`save` links from,
    or ``(None, {}, {})``: its prefix slabs and their checksums as they were
    when it was read (and checked).  Should its files have changed since, the
    links carry the change into the new group, whose checksums then fail on
    load: a miss, never data."""
    if like is None or not isinstance(like[2], dict):
        return None, {}, {}
    key, prefix, sums = like
    return os.path.join(root, key), _sliced({"prefix": prefix}), sums


#: Attempts :func:`_publish` makes while other runs replace the same group.
_PUBLISH_TRIES = 64


def save(
    path: str | os.PathLike,
    key: str,
    stats: BlockStats,
    known: dict[tuple[int, int], SegmentSplit],
    attrs: dict[str, Any],
    kept: dict[tuple[int, int], np.ndarray] | None = None,
    like: tuple[str, np.ndarray, dict] | None = None,
) -> None:
    """Write the statistics and the exact segments under ``key``, atomically
    (``attrs["min_size"]``: the ``min_size`` the segments were found with;
    ``kept``: samples of pieces a later version may scan again, see :class:`Base`).

    ``like``: ``(key, prefix, checksums)`` of a group these statistics were
    made from (the earlier version's, or the group loaded): its prefix sums
    and its arrays' checksums as they were read.  Its slabs that hold the
    same sums are hard-linked, not written again."""
    root = _local_dir(path)
    os.makedirs(root, exist_ok=True)
    tidy(root)
    final = os.path.join(root, key)
    tmp = _temp_name(root, key, "tmp")
    exact = [seg for seg in known.values() if seg.exact]
    arrays = _sliced(stats.to_arrays())
    arrays["seg_bounds"] = np.array([(s.start, s.end, s.split) for s in exact], np.int64).reshape(
        -1, 3
    )
    arrays["seg_gain"] = np.array([s.gain for s in exact], np.float64)
    arrays["seg_piece"] = np.array(
        [s.piece if s.piece is not None else (-1, -1) for s in exact], np.int64
    ).reshape(-1, 2)
    if kept:
        arrays["kept_bounds"] = np.array(list(kept), np.int64).reshape(-1, 2)
        arrays["kept_samples"] = np.concatenate(list(kept.values()), axis=0)
    attrs = dict(attrs)
    if "fit" in attrs:  # data, not a key: checked on load like the arrays
        attrs["fit_checksum"] = _record_checksum(attrs["fit"])
    slabs = attrs.pop("slabs", None)
    if slabs is not None:  # which versions of the stored objects the statistics hold
        arrays["slab_index"] = np.array(list(slabs), np.int64)
        arrays["slab_version"] = np.array(
            [np.frombuffer(bytes.fromhex(v), np.uint8) for v in slabs.values()], np.uint8
        ).reshape(len(slabs), -1)
    arrays = {name: np.ascontiguousarray(value) for name, value in arrays.items()}
    other, other_arrays, other_sums = _like(root, like)
    try:
        os.makedirs(tmp)
        sums = {}
        for name, value in arrays.items():
            digest = None
            if other is not None and name.startswith("prefix."):
                digest = _linked(tmp, name, value, other, other_arrays, other_sums)
            if digest is None:
                np.save(os.path.join(tmp, f"{name}.npy"), value, allow_pickle=False)
            sums[name] = digest
        linked = frozenset(f"{name}.npy" for name, digest in sums.items() if digest is not None)
        sums = {k: _checksum(arrays[k]) if v is None else v for k, v in sums.items()}
        write_attrs(tmp, {**attrs, "format": FORMAT, "fingerprint": key, "checksums": sums})
        _fsync_tree(tmp, linked)
        _publish(root, key, tmp, final)
        fsync_dir(root)
        listing = _held_listing(root)
        if listing is not None:
            listing.saved(key, final)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)

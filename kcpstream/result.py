"""Segmentation: the result of :func:`kcpstream.segment`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from kcpstream.errors import InputError
from kcpstream.features import FeatureMap
from kcpstream.inputs.labeled import decode_times, encode_times
from kcpstream.selection.rules import Selection

__all__ = [
    "Segmentation",
    "BatchSegmentation",
    "Diagnostics",
    "DataReads",
    "SearchWork",
    "Missing",
    "Gaps",
]


@dataclass(frozen=True)
class DataReads:
    """What a call read of the data (the attributes of :class:`Diagnostics`
    of the same names say more)."""

    samples_featurized: int
    passes: float
    samples_featurized_pass: int = 0
    samples_read_again: int = 0
    n_chunks: int = 0
    chunks_read: int = 0
    chunks_reused: int = 0
    fit_chunks_read: int = 0
    pass_tasks: int = 0


@dataclass(frozen=True)
class SearchWork:
    """What a call's search did (the attributes of :class:`Diagnostics` of
    the same names say more)."""

    n_blocks: int
    block_size: int
    rounds: int
    pieces_scanned: int
    samples_scanned: int
    in_memory: bool = False


@dataclass(frozen=True)
class Missing:
    """The samples of a series that were missing (a NaN in a channel) and left
    out (the attributes of :class:`Diagnostics` of the same names say more)."""

    n_missing: int = 0
    longest_gap: int = 0
    missing_share: float = 0.0
    #: chunks read to find the gaps, apart from the data pass (a checkpoint
    #: keeps the gaps of the chunks that did not change)
    gap_chunks_read: int = 0


@dataclass(frozen=True)
class Gaps:
    """Where a series' missing samples lie beside its change-points (the
    attributes of :class:`Segmentation` of the same names say more); empty
    arrays when no sample was missing."""

    earliest: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    segment_valid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def count(k: int, noun: str) -> str:
    """``"1 change-point"``, ``"2 change-points"``."""
    return f"{k} {noun}" if k == 1 else f"{k} {noun}s"


#: p-values below this are printed as ``<1e-300``: a gain far beyond the noise
#: has a tail probability below what float64 holds, and it rounds to 0.
SMALLEST_PVALUE = 1e-300


def time_texts(values: Any) -> list[str]:
    """Coordinate values as printed: date-times to the finest of seconds,
    milliseconds, microseconds or nanoseconds that any of them needs
    (``2024-01-09T02:27:06``, midnight included, not ``...06.000000000``),
    other values as ``str`` gives them."""
    values = np.asarray(values)
    if values.dtype.kind != "M":
        return [str(v) for v in values]
    ns = values.astype("datetime64[ns]")
    ticks = ns.astype(np.int64)
    for unit, step in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if not (ticks % step).any():
            return [str(v) for v in np.datetime_as_string(ns, unit=unit)]
    return [str(v) for v in np.datetime_as_string(ns, unit="ns")]


def pvalue_text(p: float) -> str:
    """A p-value as printed: ``"0.0032"``, ``"<1e-300"``, ``"nan"``."""
    return f"<{SMALLEST_PVALUE:.0e}" if p < SMALLEST_PVALUE else f"{p:.2g}"


def _delegate(part: str, name: str) -> property:
    return property(lambda self: getattr(getattr(self, part), name), doc=f"``{part}.{name}``")


@dataclass(frozen=True)
class Diagnostics:
    """How much work a segmentation took.

    It holds what the call read (:class:`DataReads`, ``reads``) and what its
    search did (:class:`SearchWork`, ``search``); each of their fields is
    also an attribute of its own (``diagnostics.chunks_read``).

    Attributes
    ----------
    samples_featurized : int
        Samples featurized in the data pass plus all refinement reads (a
        series searched in one call over its held samples: the samples of
        the blocks its search scanned with a Fourier map, every sample once
        more with another map; see ``rounds``).
    passes : float
        ``samples_featurized / n_samples`` (1.0 = each sample featurized once).
    seconds : float
        Wall-clock time of :func:`kcpstream.segment`, fit to result.
    seconds_data_pass : float
        Wall-clock time of the data pass alone.
    n_blocks, block_size : int
        The block grid.
    n_chunks : int
        Chunks of the input along time.
    rounds : int
        Graphs computed by the search (refinement rounds).  0 also for a
        series searched in one compiled call over its samples held in this
        process, with the same result: a short series on the block grid (at
        most :data:`kcpstream.search.held.HELD_MAX_VALUES` feature values,
        :data:`kcpstream.search.held.HELD_MAX_VALUES_FOURIER` with a Fourier
        map; no checkpoint), its samples from the sample cache or read again
        once, the blocks it scans featurized again.
    pieces_scanned, samples_scanned : int
        Blocks (or refined pieces) scanned sample by sample: read again, or
        from the features of a series searched whole.
    samples_featurized_pass : int
        Samples featurized by the data pass (0 when a checkpoint was loaded).
    checkpoint : str
        ``"loaded"`` (statistics read from a checkpoint, no data pass),
        ``"written"`` (computed and stored), ``"updated"`` (the store changed
        since a checkpoint of it was written: the statistics of the chunks
        that did not change were kept, the others read, and the result
        written), ``"recomputed"`` (a damaged checkpoint was found, recomputed
        and written again) or ``""`` (no checkpoint).
    chunks_read, chunks_reused : int
        Chunks the data pass read, and chunks whose statistics were kept from
        a checkpoint of an earlier version of the store (``"updated"``).
    samples_read_again : int
        Samples read from the source a second time because no sample cache
        (the client's, or a worker's under a distributed client) held them:
        by the data pass (chunks the fit sample had read), by refinement, and
        by the nearest neighbours' test of a short series (its samples,
        once: :mod:`kcpstream.engine.pair`).
        0 means the data was read exactly once.
    pass_tasks : int
        Tasks of the data pass: one per run of consecutive chunks holding about
        4 MiB of samples (one per chunk when chunks are that large; 0 when a
        checkpoint was loaded or the series was searched in memory).
    in_memory : bool
        The series was small enough (``n * p`` at most
        :data:`kcpstream.engine.plan.DENSE_MAX_VALUES`, no ``block_size`` given; in a
        batch, within :data:`kcpstream.engine.plan.DENSE_BATCH_BYTES` of prefix sums
        for all such series) to be read whole, featurized once and searched
        with the exact prefix sum of every position (``block_size`` 1, no
        refinement read, no dask graph after the read), or its checkpoint
        held such statistics.
    fit_chunks_read : int
        Chunks read to fit the feature map (and, with ``features="auto"``,
        to look for a cycle); 0 when the map came fitted, or when a checkpoint
        kept the fit of an earlier version of the same store whose samples
        under the fit did not change (a store appended to).
    n_missing, longest_gap : int
        Samples missing (a NaN in any channel), left out of the statistics;
        the longest run of them.
    missing_share : float
        ``n_missing / n_samples``.
    gap_chunks_read : int
        Chunks read to find where the missing samples are, apart from the
        data pass (0 when it met them, or a checkpoint kept them; after an
        append or a rewrite, the chunks that changed).
    """

    reads: DataReads
    search: SearchWork
    seconds: float
    seconds_data_pass: float
    checkpoint: str = ""
    missing: Missing = field(default_factory=Missing)

    samples_featurized = _delegate("reads", "samples_featurized")
    passes = _delegate("reads", "passes")
    samples_featurized_pass = _delegate("reads", "samples_featurized_pass")
    samples_read_again = _delegate("reads", "samples_read_again")
    n_chunks = _delegate("reads", "n_chunks")
    chunks_read = _delegate("reads", "chunks_read")
    chunks_reused = _delegate("reads", "chunks_reused")
    fit_chunks_read = _delegate("reads", "fit_chunks_read")
    pass_tasks = _delegate("reads", "pass_tasks")
    n_blocks = _delegate("search", "n_blocks")
    block_size = _delegate("search", "block_size")
    rounds = _delegate("search", "rounds")
    pieces_scanned = _delegate("search", "pieces_scanned")
    samples_scanned = _delegate("search", "samples_scanned")
    in_memory = _delegate("search", "in_memory")
    n_missing = _delegate("missing", "n_missing")
    longest_gap = _delegate("missing", "longest_gap")
    missing_share = _delegate("missing", "missing_share")
    gap_chunks_read = _delegate("missing", "gap_chunks_read")

    def to_dict(self) -> dict[str, Any]:
        """Every figure by its name, one flat dict (as JSON keeps it)."""
        run = {
            "seconds": self.seconds,
            "seconds_data_pass": self.seconds_data_pass,
            "checkpoint": self.checkpoint,
        }
        return {**asdict(self.reads), **asdict(self.search), **asdict(self.missing), **run}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostics:
        """The diagnostics :meth:`to_dict` gave."""
        parts = {
            part: {f.name: data[f.name] for f in fields(kind) if f.name in data}
            for part, kind in (("reads", DataReads), ("search", SearchWork), ("missing", Missing))
        }
        reads, search = DataReads(**parts["reads"]), SearchWork(**parts["search"])
        return cls(
            reads,
            search,
            data["seconds"],
            data["seconds_data_pass"],
            data["checkpoint"],
            Missing(**parts["missing"]),
        )


@dataclass(frozen=True)
class Segmentation:
    """Change-points of a signal, with how they were found.

    Attributes
    ----------
    changepoints : numpy.ndarray of int64
        Index of the first sample of every new segment, sorted (ruptures'
        breakpoints without the final ``n``).
    gains : numpy.ndarray of float64
        Gain (cost decrease, feature units) of each change-point: with a
        numeric ``pen`` and binary segmentation, of the split when it was
        made; otherwise, of the change-point between its two neighbours
        (for the nearest neighbours' answer, the window edge nearest each, in
        the windows' features: :mod:`kcpstream.engine.pair`).
    order : numpy.ndarray of int64
        The change-points in the order binary segmentation's path found them
        (sorted for dynamic programming).
    path_costs : numpy.ndarray of float64
        ``path_costs[k]``: cost of the path's segmentation with ``k``
        change-points (binary segmentation: the best ``k`` of its path's
        change-points, or its first ``k`` splits with a numeric ``pen``;
        dynamic programming: the best on the grid, ``inf`` where none
        exists).  The number of change-points is chosen on this path.
    cost : float
        Total cost of the returned segmentation (feature units).
    selection : Selection
        The rule that chose the number of segments, with its constants.
    segment_costs : numpy.ndarray of float64
        Cost of each segment (feature units).
    times : dict or None
        For labelled input: ``{"dim": name, "start": ..., "end": ...}`` with
        the coordinate at every segment's first and last sample (its first and
        last valid ones), and for a series with missing samples ``"earliest"``:
        the coordinate at :attr:`earliest`.
    n_samples, min_size : int
    features : FeatureMap
        The fitted feature map; ``features.transform(X)`` gives the features
        of any array.
    diagnostics : Diagnostics
    params : dict
        How the result was made: where the series came from (``source``) and
        the call's settings (``method``, ``rule``, ``n_bkps``, ``pen``,
        ``alpha``, ``d_max``, ``min_size``, ``min_duration``, ``block_size``,
        ``seed``, ``sample_size``, ``features``, ``window``, ``period``; and
        ``shape``, ``"invariant"``, ``"canonical"`` or ``"neighbours"``, where
        ``features="auto"`` segmented a cycle's windows with both shape parts
        (and a short series' subsequences by their nearest neighbours), each
        at ``alpha`` divided by the parts, and this part's answer was kept;
        ``subsequence``, the subsequences' length, where a short series
        segmented sample by sample was also tested by their nearest
        neighbours, at ``alpha / 2``, ``shape`` ``"neighbours"`` where they
        answered: see :mod:`kcpstream.engine.pair`);
        kept by :meth:`to_json`.
    pvalues : numpy.ndarray of float64
        How sure each change-point is: the p-value of its split between its
        two neighbours under the dependence-aware test of
        :mod:`kcpstream.selection.significance` (the chance of so large a gain in a
        stretch without change, with serial dependence accounted for; small
        is sure).  ``pen="auto"`` keeps only change-points with
        ``p <= alpha``, so thresholding these values needs no new run.  NaN where the noise
        could not be estimated.  Where the nearest neighbours' part answered
        (``params["shape"] == "neighbours"``), the block permutation p-value
        of each split when binary segmentation made it
        (:mod:`kcpstream.selection.neighbours`).
    gaps : Gaps
        Where the missing samples lie beside the change-points (``earliest``,
        ``segment_valid``, below).
    method : {"binseg", "dynp"}
        The search (``params["method"]``).
    earliest : numpy.ndarray of int64
        For a series with missing samples: the first index each change could
        lie at, just after the last valid sample before it.  Below the
        change-point (the first valid sample after the change) when a gap
        precedes it: the change happened somewhere in ``[earliest, changepoint]``.
        Empty when no sample was missing (each change-point is its own earliest).
    segment_valid : numpy.ndarray of int64
        For a series with missing samples: each segment's valid samples (its
        size in the statistics); empty when no sample was missing.
    """

    changepoints: np.ndarray
    gains: np.ndarray
    order: np.ndarray
    path_costs: np.ndarray
    cost: float
    selection: Selection
    n_samples: int
    min_size: int
    features: FeatureMap
    diagnostics: Diagnostics
    segment_costs: np.ndarray = field(default_factory=lambda: np.zeros(0))
    times: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    pvalues: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gaps: Gaps = field(default_factory=Gaps)

    @property
    def method(self) -> str:
        return str(self.params.get("method", "binseg"))

    @property
    def earliest(self) -> np.ndarray:
        return self.gaps.earliest

    @property
    def segment_valid(self) -> np.ndarray:
        return self.gaps.segment_valid

    @property
    def n_changepoints(self) -> int:
        return int(self.changepoints.shape[0])

    @property
    def breakpoints(self) -> list[int]:
        """ruptures-style breakpoints: the change-points followed by ``n``."""
        return [*map(int, self.changepoints), self.n_samples]

    @property
    def changepoint_times(self) -> np.ndarray | None:
        """The time coordinate at each change-point; None when the input had no
        time coordinate (:attr:`changepoints` are then the only positions)."""
        return None if self.times is None else self.times["start"][1:]

    @property
    def time_dim(self) -> str:
        return "time" if self.times is None else self.times["dim"]

    @property
    def segments(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every segment, end exclusive."""
        bounds = [0, *map(int, self.changepoints), self.n_samples]
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    @property
    def windowing(self) -> str:
        """How the samples were segmented, and why, in words: ``"windows of 8640
        samples (a cycle of 8640 samples found)"``, ``"windows of 73 samples
        (10 cycles of 7.3 samples found)"``, ``"windows of 700 samples
        (the feature map's)"`` (``window=``, or a window map's own), or ``""`` for
        samples one by one.  With
        ``features="auto"``, which of the parts it tried answered
        (:mod:`kcpstream.engine.pair`): ``"..., canonical shapes"``,
        ``"..., invariant shapes"`` or ``"..., nearest-neighbour shapes"``;
        for samples one by one whose subsequences' nearest neighbours
        answered, ``"nearest-neighbour shapes of 12 samples"``."""
        params = self.params or {}
        window = params.get("window")
        if not window:  # samples one by one (their subsequences' shapes may answer)
            if params.get("shape") == "neighbours":
                return f"nearest-neighbour shapes of {params.get('subsequence')} samples"
            return ""
        period = params.get("period")
        if period is None:
            return f"windows of {window} samples (the feature map's)"
        cycles = round(window / period)
        held = f"{cycles} cycles" if cycles > 1 else "a cycle"
        text = f"windows of {window} samples ({held} of {period:g} samples found)"
        shape = params.get("shape")  # which of the parts tried answered
        if shape == "neighbours":
            shape = "nearest-neighbour"
        return text if shape is None else f"{text}, {shape} shapes"

    def __repr__(self) -> str:
        cps = ", ".join(map(str, self.changepoints[:10]))
        more = ", ..." if self.n_changepoints > 10 else ""
        d = self.diagnostics
        windows = self.windowing
        windows = f", {windows}" if windows else ""
        gaps = ""
        if d.n_missing:
            gaps = (
                f" ({count(d.n_missing, 'sample')} missing, {100 * d.missing_share:.3g} %, "
                f"longest gap {d.longest_gap})"
            )
        shape = (self.params.get("source") or {}).get("shape") or []
        channels = f" of {shape[1]} channels" if len(shape) > 1 and shape[1] > 1 else ""
        kept = f"; checkpoint {d.checkpoint}" if d.checkpoint else ""
        return (
            f"<Segmentation: {count(self.n_changepoints, 'change-point')} in "
            f"{self.n_samples} samples{channels}{gaps} [{cps}{more}]; {self.method}, "
            f"{self.selection.rule}; "
            f"features={type(self.features).__name__}(p={self.features.n_features_out_})"
            f"{windows}; passes={d.passes:.3f}, {d.seconds:.2f} s{kept}>"
        )

    def plot(
        self, data: Any = None, *, true_changepoints: Any = None, ax: Any = None, **kwargs: Any
    ):
        """Draw ``data`` (the segmented signal) with the segments and change-points.

        ``data`` may be left out when the result keeps its input: the path or
        URL, zarr array, dask array or xarray object the call read, read again
        as it is now (not an in-memory numpy array; a result read from JSON
        keeps only a zarr store given by path).  A min/max envelope over at
        most ``max_points`` (4000) bins, computed in one dask pass; several
        channels each in a band of its own, over its own range; gaps hatched;
        a window map named in the title.  ``true_changepoints`` are drawn
        dashed.  Needs matplotlib (``pip install 'kcpstream[plot]'``).
        Returns the axes.
        """
        from kcpstream.plot import plot_segmentation

        data, kwargs = self._source(data, kwargs, "plot")
        return plot_segmentation(self, data, true_changepoints=true_changepoints, ax=ax, **kwargs)

    def _source(self, data: Any, kwargs: dict[str, Any], method: str) -> tuple[Any, dict[str, Any]]:
        """``data``, or the input this result was made from (a path or URL, a
        zarr array, a dask array, an xarray object, as the call read it and
        with the reading arguments it was read with: the same path needs no
        ``variable=`` again), or the zarr store of a result read from JSON."""
        kept = self.__dict__.get("_input")
        if data is None and kept is not None:
            return kept[0], {**kept[1], **kwargs}
        src = (self.params or {}).get("source") or {}
        path = src.get("path") if src.get("kind") in ("zarr", "xarray") else None
        if data is None and path is None:
            why = (
                "a result keeps no reference to an in-memory numpy array"
                if src.get("kind") == "numpy"
                else "a result read from JSON or unpickled opens again only a zarr store "
                "given by path"
            )
            raise TypeError(f"give the data to draw, as in res.{method}(x): {why}")
        if data is None or (isinstance(data, str | os.PathLike) and os.fspath(data) == path):
            from kcpstream.inputs.stores import store_input

            # the store opened as the call opened it (several variables: through xarray)
            reading = {k: src.get(k) for k in ("variable", "variables", "dim")}
            data, _ = store_input(path, reading, False, None)
            return data, {**{k: v for k, v in reading.items() if v is not None}, **kwargs}
        return data, kwargs

    def keep_input(
        self, data: Any, reading: dict[str, Any], path: dict[str, Any] | None = None
    ) -> Segmentation:
        """Keep what the call read (``data`` and the arguments it was read with)
        for :meth:`plot` and :meth:`plot_gain` without data; not an in-memory
        numpy array (the result would keep it alive), and never pickled or
        written to JSON.  ``path``: the path or URL and reading arguments of a
        store the call opened through xarray, recorded in ``params["source"]``
        so that a result read from JSON opens it again too.  Returns the result."""
        src = self.params.get("source") or {}
        if path is not None and src.get("kind") == "xarray":
            self.params["source"] = {**src, **path}
        if src.get("kind") != "numpy":
            object.__setattr__(self, "_input", (data, dict(reading)))
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_input"}

    def plot_path(self, *, ax: Any = None):
        """Draw the cost path against the number of segments, and the chosen one."""
        from kcpstream.plot import plot_path

        return plot_path(self, ax=ax)

    def plot_gain(self, data: Any = None, segment: int = 0, *, ax: Any = None, **kwargs: Any):
        """Draw the gain of splitting one segment of the result at each position."""
        from kcpstream.plot import plot_gain

        data, kwargs = self._source(data, kwargs, "plot_gain")
        return plot_gain(self, data, segment, ax=ax, **kwargs)

    def to_xarray(self):
        """The change-points as an ``xarray.Dataset`` along a ``changepoint`` dimension.

        Coordinates: ``index`` (position) and the time coordinate (named after the
        input's time dimension); variables: ``gain`` and ``pvalue``.  Attributes describe the
        selection and the feature map.
        """
        import xarray as xr

        coords = {"index": ("changepoint", self.changepoints)}
        if self.times is not None:
            coords[self.time_dim] = ("changepoint", self.changepoint_times)
        return xr.Dataset(
            {"gain": ("changepoint", self.gains), "pvalue": ("changepoint", self._pvalues())},
            coords=coords,
            attrs={
                "n_samples": self.n_samples,
                "method": self.method,
                "selection": json.dumps(self.selection.to_dict()),
                "cost": self.cost,
                "features": self.features.to_json(),
            },
        )

    def to_dataframe(self):
        """The segment table as a ``pandas.DataFrame``, one row per segment.

        Columns: ``start``/``end`` (index, end exclusive, as :attr:`segments`),
        ``length``, ``cost``, ``gain`` and ``pvalue`` of the change-point the
        segment starts with (NaN for the first segment) and, for labelled
        input, ``start_<dim>``/``last_<dim>`` (the coordinate of the first and
        of the last sample: both inclusive, since the coordinate after a
        series' last sample does not exist).  For a series with missing samples, also ``valid`` (the
        segment's valid samples) and ``earliest`` (and ``earliest_<dim>``):
        where its change could begin, below ``start`` when a gap precedes it
        (:attr:`earliest`).  ``attrs`` holds the feature map used (``features``)
        and, for windows, their ``window`` and the cycle's ``period`` when a
        cycle chose them (:attr:`windowing`).
        """
        import pandas as pd

        bounds = np.array([0, *self.changepoints, self.n_samples], dtype=np.int64)
        table = {
            "start": bounds[:-1],
            "end": bounds[1:],
            "length": np.diff(bounds),
            "cost": self.segment_costs,
            "gain": np.r_[np.nan, self.gains],
            "pvalue": np.r_[np.nan, self._pvalues()],
        }
        if self.times is not None:
            table[f"start_{self.time_dim}"] = self.times["start"]
            table[f"last_{self.time_dim}"] = self.times["end"]
        if self.diagnostics.n_missing:
            table["valid"] = self.segment_valid
            table["earliest"] = np.r_[0, self.earliest]
            if self.times is not None and "earliest" in self.times:
                table[f"earliest_{self.time_dim}"] = np.r_[
                    self.times["start"][:1], self.times["earliest"]
                ]
        frame = pd.DataFrame(table, index=pd.RangeIndex(len(bounds) - 1, name="segment"))
        params = self.params or {}
        frame.attrs.update(
            features=params.get("features", repr(self.features)),
            window=params.get("window"),
            period=params.get("period"),
        )
        return frame

    def _pvalues(self) -> np.ndarray:
        if self.pvalues.shape[0] == self.changepoints.shape[0]:
            return self.pvalues
        return np.full(self.changepoints.shape[0], np.nan)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dictionary of the whole result."""
        return {
            "changepoints": self.changepoints.tolist(),
            "pvalues": [None if np.isnan(v) else float(v) for v in self._pvalues()],
            "gains": self.gains.tolist(),
            "order": self.order.tolist(),
            "path_costs": self.path_costs.tolist(),
            "cost": self.cost,
            "method": self.method,
            "selection": self.selection.to_dict(),
            "n_samples": self.n_samples,
            "min_size": self.min_size,
            "features": self.features.to_dict(),
            "diagnostics": self.diagnostics.to_dict(),
            "segment_costs": self.segment_costs.tolist(),
            "times": None
            if self.times is None
            else {
                "dim": self.times["dim"],
                "start": encode_times(self.times["start"]),
                "end": encode_times(self.times["end"]),
                **(
                    {"earliest": encode_times(self.times["earliest"])}
                    if "earliest" in self.times
                    else {}
                ),
            },
            "params": self.params,
            **(
                {"earliest": self.earliest.tolist(), "segment_valid": self.segment_valid.tolist()}
                if self.earliest.size or self.segment_valid.size
                else {}
            ),
        }

    def to_json(self, **kwargs: Any) -> str:
        """The result as JSON (see :meth:`from_json`)."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Segmentation:
        return cls(
            changepoints=np.asarray(data["changepoints"], dtype=np.int64),
            gains=np.asarray(data["gains"], dtype=np.float64),
            order=np.asarray(data["order"], dtype=np.int64),
            path_costs=np.asarray(data["path_costs"], dtype=np.float64),
            cost=float(data["cost"]),
            selection=Selection.from_dict(data["selection"]),
            n_samples=int(data["n_samples"]),
            min_size=int(data["min_size"]),
            features=FeatureMap.from_dict(data["features"]),
            diagnostics=Diagnostics.from_dict(data["diagnostics"]),
            segment_costs=np.asarray(data.get("segment_costs", []), dtype=np.float64),
            times=None
            if data.get("times") is None
            else {
                "dim": data["times"]["dim"],
                "start": decode_times(data["times"]["start"]),
                "end": decode_times(data["times"]["end"]),
                **(
                    {"earliest": decode_times(data["times"]["earliest"])}
                    if "earliest" in data["times"]
                    else {}
                ),
            },
            params={"method": str(data.get("method", "binseg")), **data.get("params", {})},
            pvalues=np.array(
                [np.nan if v is None else v for v in data.get("pvalues", [])], dtype=np.float64
            ),
            gaps=Gaps(
                np.asarray(data.get("earliest", []), dtype=np.int64),
                np.asarray(data.get("segment_valid", []), dtype=np.int64),
            ),
        )

    @classmethod
    def from_json(cls, text: str) -> Segmentation:
        """The result :meth:`to_json` gave (the text, not a file's path)."""
        data = _json_of(text, "Segmentation")
        if isinstance(data, dict) and "series" in data and "batch_dims" in data:
            raise InputError(
                "this JSON is a batch's result (one per series, batch_dims "
                f"{data['batch_dims']!r}): read it with BatchSegmentation.from_json"
            )
        return _from_parsed(cls, data, "Segmentation")


class BatchSegmentation:
    """Segmentations of independent series, one per label of the batch dimensions.

    ``res[label]`` (or ``res[{"sensor": label}]`` with several batch
    dimensions) is the :class:`Segmentation` of one series; iterating yields
    ``(labels, segmentation)`` pairs.
    """

    def __init__(
        self, batch_dims: list[str], labels: list[dict[str, Any]], results: list[Segmentation]
    ):
        self.batch_dims = list(batch_dims)
        self.labels = [dict(lab) for lab in labels]
        self.results = list(results)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self):
        return iter(zip(self.labels, self.results, strict=True))

    def __getitem__(self, key) -> Segmentation:
        if not isinstance(key, dict):
            if len(self.batch_dims) != 1:
                raise KeyError(f"give a dict of labels for the batch dimensions {self.batch_dims}")
            key = {self.batch_dims[0]: key}
        for labels, res in self:
            if all(labels.get(k) == v for k, v in key.items()):
                return res
        raise KeyError(f"no series with labels {key}; labels are {self.labels}")

    def __repr__(self) -> str:
        lines = [f"<BatchSegmentation over {self.batch_dims}: {len(self)} series"]
        for labels, res in list(self)[:10]:
            name = ", ".join(f"{k}={v}" for k, v in labels.items())
            cps, p = res.changepoints.tolist(), res._pvalues()
            when = time_texts(res.changepoint_times) if res.times is not None else None
            shown = (
                ", ".join(  # (a coordinate of positions says nothing more)
                    f"{c}"
                    + ("" if when is None or str(when[i]) == str(c) else f" {when[i]}")
                    + f" (p={pvalue_text(p[i])})"
                    for i, c in enumerate(cps[:8])
                )
                + (", ..." if len(cps) > 8 else "")
            )
            lines.append(f"  {name}: {count(len(cps), 'change-point')} [{shown}]")
        if len(self) > 10:
            lines.append(f"  ... {len(self) - 10} more series (to_dataframe() lists all)")
        return "\n".join(lines) + ">"

    def to_xarray(self):
        """All series' change-points in one ``xarray.Dataset`` with the batch dimensions.

        The ``changepoint`` dimension is as long as the longest list; shorter
        ones are padded (``index`` -1, time NaT or NaN, ``gain`` NaN).
        """
        import xarray as xr

        parts = []
        width = max((r.n_changepoints for r in self.results), default=0)
        for labels, res in self:
            ds = res.to_xarray()
            ds = ds.drop_attrs() if hasattr(ds, "drop_attrs") else ds.assign_attrs({})
            ds = ds.reset_coords().pad(changepoint=(0, width - res.n_changepoints))
            ds["index"] = ds["index"].fillna(-1).astype(np.int64)
            parts.append(ds.expand_dims({d: [labels[d]] for d in self.batch_dims}))
        out = (
            xr.combine_by_coords(parts)
            if len(self.batch_dims) > 1
            else xr.concat(parts, self.batch_dims[0])
        )
        out = out.set_coords([c for c in ("index", self.results[0].time_dim) if c in out])
        out.attrs["n_samples"] = self.results[0].n_samples if self.results else 0
        return out

    def to_dataframe(self):
        """All series' segment tables, with a column per batch dimension."""
        import pandas as pd

        frames = []
        for labels, res in self:
            df = res.to_dataframe().reset_index()
            for d in reversed(self.batch_dims):
                df.insert(0, d, labels[d])
            frames.append(df)
        return pd.concat(frames, ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_dims": self.batch_dims,
            "series": [
                {"labels": {k: _json_label(v) for k, v in labels.items()}, "result": res.to_dict()}
                for labels, res in self
            ],
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchSegmentation:
        series = data["series"]
        return cls(
            data["batch_dims"],
            [s["labels"] for s in series],
            [Segmentation.from_dict(s["result"]) for s in series],
        )

    @classmethod
    def from_json(cls, text: str) -> BatchSegmentation:
        """The results :meth:`to_json` gave (the text, not a file's path)."""
        data = _json_of(text, "BatchSegmentation")
        if isinstance(data, dict) and "changepoints" in data and "series" not in data:
            raise InputError("this JSON is one series' result: read it with Segmentation.from_json")
        return _from_parsed(cls, data, "BatchSegmentation")


def _json_of(text: Any, kind: str) -> Any:
    """``text`` parsed, or the :class:`InputError` saying what it is instead."""
    if isinstance(text, os.PathLike) or (
        isinstance(text, str) and not text.lstrip().startswith("{") and os.path.exists(text)
    ):
        raise InputError(
            f"{kind}.from_json takes the JSON text, not a file's path: "
            f"{kind}.from_json(open({os.fspath(text)!r}).read())"
        )
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{kind}.from_json takes the text to_json gave; this is not JSON ({exc})"
        ) from None


def _from_parsed(cls, data: Any, kind: str):
    """``cls.from_dict(data)``, or the :class:`InputError` naming what is missing."""
    try:
        return cls.from_dict(data)
    except (KeyError, TypeError, AttributeError) as exc:
        missing = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc)
        raise InputError(
            f"this JSON is not a {kind} that to_json gave ({missing}); it may come from "
            "another tool or have been edited"
        ) from None


def _json_label(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.datetime64):
        return str(value)
    return value

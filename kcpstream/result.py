"""Segmentation: the result of :func:`kcpstream.segment`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .features import FeatureMap
from .select import Selection

__all__ = ["Segmentation", "Diagnostics"]


@dataclass(frozen=True)
class Diagnostics:
    """How much work a segmentation took.

    Attributes
    ----------
    samples_featurized : int
        Samples featurized in the data pass plus all refinement reads.
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
        Calls to ``dask.compute`` made by the search (refinement rounds).
    pieces_scanned, samples_scanned : int
        Blocks (or refined pieces) read again and scanned sample by sample.
    """

    samples_featurized: int
    passes: float
    seconds: float
    seconds_data_pass: float
    n_blocks: int
    block_size: int
    n_chunks: int
    rounds: int
    pieces_scanned: int
    samples_scanned: int


@dataclass(frozen=True)
class Segmentation:
    """Change-points of a signal, with how they were found.

    Attributes
    ----------
    changepoints : numpy.ndarray of int64
        Index of the first sample of every new segment, sorted (ruptures'
        breakpoints without the final ``n``).
    gains : numpy.ndarray of float64
        Gain (cost decrease, feature units) of each change-point: for binary
        segmentation, of the split when it was made; for dynamic
        programming, of the change-point between its two neighbours.
    order : numpy.ndarray of int64
        The change-points in the order binary segmentation found them
        (sorted for dynamic programming).
    path_costs : numpy.ndarray of float64
        ``path_costs[k]``: cost of the path's segmentation with ``k``
        change-points (binary segmentation: its first ``k`` splits; dynamic
        programming: the best on the grid, ``inf`` where none exists).  The
        number of change-points is chosen on this path.
    cost : float
        Total cost of the returned segmentation (feature units).
    method : {"binseg", "dynp"}
    selection : Selection
        The rule that chose the number of segments, with its constants.
    n_samples, min_size : int
    features : FeatureMap
        The fitted feature map; ``features.transform(X)`` gives the features
        of any array.
    diagnostics : Diagnostics
    params : dict
        The selection parameters (``n_bkps``, ``pen``, ...).
    """

    changepoints: np.ndarray
    gains: np.ndarray
    order: np.ndarray
    path_costs: np.ndarray
    cost: float
    method: str
    selection: Selection
    n_samples: int
    min_size: int
    features: FeatureMap
    diagnostics: Diagnostics
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def n_changepoints(self) -> int:
        return int(self.changepoints.shape[0])

    @property
    def breakpoints(self) -> list[int]:
        """ruptures-style breakpoints: the change-points followed by ``n``."""
        return [*map(int, self.changepoints), self.n_samples]

    @property
    def segments(self) -> list[tuple[int, int]]:
        """``(start, end)`` of every segment, end exclusive."""
        bounds = [0, *map(int, self.changepoints), self.n_samples]
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    def __repr__(self) -> str:
        cps = ", ".join(map(str, self.changepoints[:10]))
        more = ", ..." if self.n_changepoints > 10 else ""
        d = self.diagnostics
        return (
            f"<Segmentation: {self.n_changepoints} change-points in {self.n_samples} samples "
            f"[{cps}{more}]; {self.method}, {self.selection.rule}; "
            f"features={type(self.features).__name__}"
            f"(p={self.features.n_features_out_}); passes={d.passes:.3f}, {d.seconds:.2f} s>"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dictionary of the whole result."""
        return {
            "changepoints": self.changepoints.tolist(),
            "gains": self.gains.tolist(),
            "order": self.order.tolist(),
            "path_costs": self.path_costs.tolist(),
            "cost": self.cost,
            "method": self.method,
            "selection": self.selection.to_dict(),
            "n_samples": self.n_samples,
            "min_size": self.min_size,
            "features": self.features.to_dict(),
            "diagnostics": asdict(self.diagnostics),
            "params": self.params,
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
            method=str(data["method"]),
            selection=Selection.from_dict(data["selection"]),
            n_samples=int(data["n_samples"]),
            min_size=int(data["min_size"]),
            features=FeatureMap.from_dict(data["features"]),
            diagnostics=Diagnostics(**data["diagnostics"]),
            params=dict(data.get("params", {})),
        )

    @classmethod
    def from_json(cls, text: str) -> Segmentation:
        return cls.from_dict(json.loads(text))

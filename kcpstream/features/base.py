"""The feature-map interface shared by every map, and its JSON form."""

from __future__ import annotations

import abc
import copy
import json
import math
from collections.abc import Callable
from typing import Any, ClassVar, Self

import numpy as np

from kcpstream._kernels.featurize import groups_to_rows, quantize
from kcpstream.errors import InputError, NotFittedError
from kcpstream.features.registry import get_feature_map_class

__all__ = [
    "FeatureMap",
    "NotFittedError",
    "QUANTUM_BITS",
    "SUM_BITS",
    "exponent_for_amplitude",
]

#: Bits of the fixed-point grid below the largest expected feature magnitude:
#: a feature of magnitude ``a`` is represented by an integer of at most
#: ``2**QUANTUM_BITS`` (more precise than float32 near ``a``).  Such a grid
#: keeps the exact int64 sums of ``2**(SUM_BITS - QUANTUM_BITS)`` samples (1.7e10);
#: a longer series is segmented on a coarser grid (:meth:`FeatureMap.holding`).
QUANTUM_BITS = 28

#: Every coordinate's sum over a series stays below ``2**SUM_BITS`` in
#: magnitude, so that a difference of two sums (a range of the prefix sums,
#: the right part of a split) stays below ``2**63``: no int64 sum overflows.
SUM_BITS = 62

#: Samples featurized together in one tile (bounded memory, amortised calls).
DEFAULT_TILE = 4096


def exponent_for_amplitude(amplitude: float) -> int:
    """Grid exponent ``k`` such that ``amplitude * 2**k <= 2**QUANTUM_BITS``."""
    if not math.isfinite(amplitude) or amplitude <= 0:
        amplitude = 1.0
    return QUANTUM_BITS - math.ceil(math.log2(amplitude))


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "data": value.ravel().tolist(),
        }
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"dtype", "shape", "data"}:
        return np.asarray(value["data"], dtype=value["dtype"]).reshape(value["shape"])
    return value


class FeatureMap(abc.ABC):
    """A map ``phi`` from samples in R^d to R^p with ``<phi(x), phi(y)> ~ k(x, y)``.

    Subclasses follow the scikit-learn convention: ``__init__`` stores the
    parameters, :meth:`fit` computes the fitted state from a small sample
    (attributes ending in ``_``), :meth:`transform` featurizes any array.

    Features are float32 values on the fixed-point grid ``2**-quantum_exponent_``
    so that sums of features are exact integers; see :mod:`kcpstream._kernels`.

    **Writing a map.** A subclass defines

    * ``name``: its registry name (:func:`~kcpstream.features.register_feature_map`
      makes ``segment(x, features="name:p")`` and saved results find it);
      ``_param_names``: the constructor's parameters, stored as attributes of
      the same names; ``_fitted_names``: the fitted attributes, saved in JSON;
    * :meth:`fit` (abstract): the fitted state from a sample ``(m, d)``; it
      must set ``quantum_exponent_`` (:func:`exponent_for_amplitude` of the
      largest feature magnitude) and ``center_`` (shape ``(d,)``, which gives
      :attr:`n_features_in_`), and list both in ``_fitted_names``;
    * :attr:`n_features_out_` (abstract): ``p``;
    * :meth:`featurize_tile` (abstract): the raw float32 features of a tile;
      the engine quantizes them to the grid, so every code path sums the same
      integers;

    and may refine :attr:`tile_groups_` (the layout of a tile's features),
    :attr:`quantized_norm_bound_` (a bound on every sample's feature norm,
    tightening the search's pruning), :attr:`quantized_amplitude_bound_` (a
    bound on every coordinate: the engine then puts a long series on a grid
    that holds it before reading, instead of checking the features measured
    after the pass) and :attr:`accumulate_tile_stats` (block statistics
    without dense features).  The grid exponent is the map's to choose from
    its fit; :meth:`holding` only lowers it for a series too long for it.
    ``tests/test_feature_conformance.py`` checks every registered map against
    this contract.
    """

    #: registry name
    name: ClassVar[str] = ""
    #: names of the constructor parameters (stored as attributes)
    _param_names: ClassVar[tuple[str, ...]] = ()
    #: names of the fitted attributes (serialised to JSON)
    _fitted_names: ClassVar[tuple[str, ...]] = ()

    # -- parameters -------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """The constructor parameters."""
        return {k: getattr(self, k) for k in self._param_names}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        state = "fitted" if self.is_fitted else "not fitted"
        return f"{type(self).__name__}({args})  # {state}"

    # -- fitted state -----------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` has been called (or the state was loaded)."""
        return all(hasattr(self, k) for k in self._fitted_names)

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call .fit(sample) first, "
                "or let kcpstream.segment fit it on a sample of the signal"
            )

    @property
    @abc.abstractmethod
    def n_features_out_(self) -> int:
        """Output dimension p of the fitted map."""

    @property
    def n_features_in_(self) -> int:
        """Input dimension d the map was fitted on."""
        self._check_fitted()
        return int(self.center_.shape[0])

    @abc.abstractmethod
    def fit(self, sample: np.ndarray) -> Self:
        """Fit the map on a sample of shape (m, d) (or (m,)); returns ``self``."""

    @property
    def quantized_norm_bound_(self) -> float:
        """A bound on ``||q||`` of every sample known from the map alone, or -1."""
        return -1.0

    @property
    def quantized_amplitude_bound_(self) -> float:
        """A bound on every coordinate ``|q_j|`` of every sample known from the
        map alone, or -1 (the data pass measures the features' norms).  A
        bound on the norm bounds each coordinate; maps whose coordinates are
        bounded more tightly than their norm say so here."""
        return self.quantized_norm_bound_

    @property
    def capacity_(self) -> int:
        """Samples (feature vectors) one series may hold for the exact int64
        sums of this map's features to stay below ``2**SUM_BITS``: known from
        the map when it bounds every coordinate; otherwise the nominal capacity
        of its grid (the fit sample's largest coordinate at ``2**QUANTUM_BITS``
        units), which the data pass checks against the features measured."""
        self._check_fitted()
        bound = self.quantized_amplitude_bound_
        if bound <= 0:
            bound = 2.0 ** (QUANTUM_BITS - self.grid_shift_)
        return int(2.0**SUM_BITS // bound)

    @property
    def grid_shift_(self) -> int:
        """Bits by which :meth:`holding` coarsened the grid of the fit (0: none)."""
        return int(getattr(self, "_grid_shift", 0))

    def holding(self, n: int) -> Self:
        """This map, or a copy of it on a grid coarse enough for the exact sums
        of a series of ``n`` samples (feature vectors) to hold.

        Each halving of the grid doubles :attr:`capacity_`; the grid of a
        series of ``10**12`` samples is ``2**-22`` of the largest feature, about
        float32's own resolution there, which keeps the sums far finer than
        any kernel approximation (``benchmarks/results/headroom.md``).  The
        same ``n`` always gives the same grid, so the statistics of a series
        do not depend on how it grew; a checkpoint of a coarser or finer grid
        is another map's and is not reused.
        """
        self._check_fitted()
        fmap = self
        while int(n) > fmap.capacity_:
            if fmap is self:
                fmap = copy.deepcopy(self)
            fmap.quantum_exponent_ = int(fmap.quantum_exponent_) - 1
            fmap._grid_shift = fmap.grid_shift_ + 1
        return fmap

    @property
    def window_samples(self) -> int:
        """Samples per feature vector: 1 for pointwise maps, the window length for
        window maps (``segment`` then segments the sequence of windows)."""
        return int(getattr(self, "window", 1))

    @property
    def tile_groups_(self) -> tuple[int, int]:
        """``(k, m)``: a tile of L samples is a float32 array (k, L, m), ``k * m = p``."""
        return 1, self.n_features_out_

    @abc.abstractmethod
    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        """Write the raw float32 features of tile ``x`` (L, d) into ``out`` (k, L, m).

        ``x`` holds the samples as read (any numeric dtype); ``out`` is a
        buffer of :attr:`tile_groups_`'s layout that may hold anything on
        entry.  Only the values written count: the same samples must give the
        same features whatever the tile, so that statistics do not depend on
        how the data is chunked."""

    #: Optional: block statistics of a tile without dense features, called as
    #: ``accumulate_tile_stats(x, tile_start, block_size, first_block, cnt, S,
    #: Q, M2, R)`` in place of :meth:`featurize_tile` and the generic
    #: accumulation; it must add exactly what those would (the counts, the
    #: integer sums ``S`` of the quantized features per block, and ``Q``,
    #: ``M2``, ``R`` as :func:`kcpstream._kernels.blockstats.accumulate_tile`
    #: does).  None: the generic path.
    accumulate_tile_stats: ClassVar[Callable[..., None] | None] = None

    def tile_buffer(self, length: int) -> np.ndarray:
        """A float32 buffer for the features of ``length`` samples, (k, length, m)."""
        k, m = self.tile_groups_
        return np.empty((k, length, m), dtype=np.float32)

    def _check_input(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X)
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2:
            raise InputError(
                f"expected an array of shape (n,) or (n, d), got shape {X.shape}; "
                "reshape it so that time is the first axis"
            )
        if X.shape[1] != self.n_features_in_:
            raise InputError(
                f"this feature map was fitted on d={self.n_features_in_} channels but the "
                f"input has d={X.shape[1]}; fit a new map on data of the same width"
            )
        return X

    def transform(self, X: np.ndarray, *, tile: int = DEFAULT_TILE) -> np.ndarray:
        """Features of every sample of ``X``.

        Parameters
        ----------
        X : array of shape (n,) or (n, d)
        tile : samples featurized together (does not change the result)

        Returns
        -------
        numpy.ndarray of float32, shape (n, p)
            The features, exactly the values whose sums the data pass
            accumulates (on the grid ``2**-quantum_exponent_``).
        """
        self._check_fitted()
        X = self._check_input(X)
        n = X.shape[0]
        result = np.empty((n, self.n_features_out_), dtype=np.float32)
        for lo in range(0, n, tile):
            hi = min(n, lo + tile)
            out = self.tile_buffer(hi - lo)
            self.featurize_tile(X[lo:hi], out)
            result[lo:hi] = groups_to_rows(quantize(out, self.quantum_exponent_))
        return result

    def gram(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        """The approximate kernel matrix ``phi(X) phi(Y)^T`` (float64)."""
        zx = self.transform(X).astype(np.float64)
        zy = zx if Y is None else self.transform(Y).astype(np.float64)
        return zx @ zy.T

    # -- JSON -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible description: parameters and fitted state."""
        out: dict[str, Any] = {"feature_map": self.name, "params": self.get_params()}
        if self.is_fitted:
            out["fitted"] = {k: _encode(getattr(self, k)) for k in self._fitted_names}
            if self.grid_shift_:  # absent on the grid of the fit, as before it existed
                out["fitted"]["_grid_shift"] = self.grid_shift_
        return out

    def to_json(self) -> str:
        """The map as a JSON string (round-trips exactly through :meth:`from_json`)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureMap:
        """Rebuild a map (fitted or not) from :meth:`to_dict` output."""
        klass = get_feature_map_class(data["feature_map"])
        if cls is not FeatureMap and not issubclass(klass, cls):
            raise TypeError(f"the description is of a {klass.__name__}, not a {cls.__name__}")
        obj = klass(**data["params"])
        for k, v in data.get("fitted", {}).items():
            setattr(obj, k, _decode(v))
        return obj

    @classmethod
    def from_json(cls, text: str) -> FeatureMap:
        """Rebuild a map from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        if self.get_params() != other.get_params() or self.is_fitted != other.is_fitted:
            return False
        for k in self._fitted_names if self.is_fitted else ():
            a, b = getattr(self, k), getattr(other, k)
            if isinstance(a, np.ndarray):
                if not (a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)):
                    return False
            elif a != b:
                return False
        return self.grid_shift_ == other.grid_shift_

    __hash__ = None  # type: ignore[assignment]


def as_sample(sample: np.ndarray) -> np.ndarray:
    """A fit sample as a finite float64 (m, d) array, or a clear error."""
    x = np.asarray(sample, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0:
        raise InputError(f"a fit sample must have shape (m,) or (m, d) with m >= 1, got {x.shape}")
    if not np.isfinite(x).all():
        bad = int(np.argmax(~np.isfinite(x).all(axis=1)))
        raise InputError(
            f"the fit sample contains NaN or inf (first at row {bad}); "
            "remove or fill non-finite values before fitting"
        )
    return x

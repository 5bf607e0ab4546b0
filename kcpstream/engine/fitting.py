"""The feature map's fit: the fitted map, what the fit read, and a fit a
checkpoint kept for a later version.

``features="auto"`` first looks at a few stretches of the series for a cycle
(:mod:`kcpstream.engine.autofeatures`), and an unfitted map is fitted on a sample of
the series: both read whole chunks spread over its first epoch
(:func:`~kcpstream.inputs.signal.epoch_length`).  A checkpoint keeps the fitted map
with what the fit was made of (:class:`FitRecord`: the ``features`` argument,
``sample_size``, ``seed``, the period found and the windows of samples read).
A later call on another version of the same stored array (appended to, or
rewritten elsewhere) whose fit would read the same windows, all of them in
stored objects whose versions did not change, takes the fitted map from the
record and reads nothing for it: the same samples make the same fit
(:func:`still_fits`).

:func:`fitted_map` reads its sample through the job's sample cache
(:func:`~kcpstream.passes.data.fit_sample`); the records are stored with the
checkpoint (:mod:`kcpstream.engine.stored`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from kcpstream.engine.autofeatures import Cycle, auto_window, stretch_windows
from kcpstream.errors import InputError
from kcpstream.features import FeatureMap
from kcpstream.inputs.signal import NonFiniteInput, Signal, fit_windows, window_fit_length
from kcpstream.passes.cache import SampleCache
from kcpstream.passes.data import fit_sample


@dataclass(frozen=True)
class FitRecord:
    """A fitted feature map and what it was fitted on.

    Attributes
    ----------
    features : str
        The ``features`` argument (a spec string, or ``"auto"``).
    sample_size, seed : int
        The fit's settings.
    channels : int
        Channels of the series.
    period, period_error : float or None
        The period of the cycle ``"auto"`` found in its stretches, to a
        fraction of a sample, and its standard error (None: none, or not
        ``"auto"``; a record without the error is one from before windows of
        whole cycles, not read).
    window : int
        Samples per feature vector of the fitted map.
    auto : bool
        ``"auto"`` that segments sample by sample.
    reads : tuple of (int, int)
        The ``[start, end)`` windows of samples the fit read (:func:`fit_reads`).
    fmap : str
        The fitted map's JSON.
    subsequence : int or None
        For ``"auto"`` sample by sample on one channel, the length of the
        subsequences its dependent samples are also tested on
        (:func:`~kcpstream.selection.neighbours.serial_dependence`); None
        when they are independent (and in a record from before).
    """

    features: str
    sample_size: int
    seed: int | None
    channels: int
    period: float | None
    period_error: float | None
    window: int
    auto: bool
    reads: tuple[tuple[int, int], ...]
    fmap: str
    subsequence: int | None = None

    @property
    def cycle(self) -> Cycle | None:
        """The cycle found, or None."""
        if self.period is None:
            return None
        return Cycle(self.period, math.inf if self.period_error is None else self.period_error)

    def to_dict(self) -> dict:
        # an error of inf is kept as None: JSON has no infinity
        error = self.period_error
        finite = None if error is None or not math.isfinite(error) else error
        return {**asdict(self), "period_error": finite, "reads": [list(w) for w in self.reads]}

    @classmethod
    def from_dict(cls, data: dict) -> FitRecord:
        if data.get("auto") and data.get("channels") == 1 and "subsequence" not in data:
            # from before the dependence check: whether its samples are
            # dependent is not known, and a fresh fit may test them otherwise
            raise KeyError("subsequence")
        return cls(**{**data, "reads": tuple((int(a), int(b)) for a, b in data["reads"])})


#: Samples (and windows) of the wider fit sample read when the fit sample holds
#: one value only: a rare event (a flag raised once in 10^4 samples) is then
#: seldom in the 2048 samples of the fit sample but nearly always in 2^16, and
#: the kernel's scale is the distance between the values it does hold.  Read
#: only in that case (every other fit reads what it read before).
WIDE_FIT_POINTS = 2**16
WIDE_FIT_WINDOWS = 64


def wide_fit_windows(n: int) -> list[tuple[int, int]]:
    """The windows of the wider fit sample of a series of ``n`` samples (or
    feature windows): the whole first epoch up to :data:`WIDE_FIT_POINTS`."""
    return fit_windows(n, WIDE_FIT_POINTS, WIDE_FIT_WINDOWS)


#: What a checkpoint keeps the fit of the second map of a cycle's windows under
#: (:mod:`kcpstream.engine.pair`): a record of the windows its fit read, found
#: again for a later version of the series (only by that map).
TWIN_FIT = "auto:canonical"


def fit_reads(
    n: int, auto: bool, sample_size: int, window: int, wide: bool = False
) -> list[tuple[int, int]]:
    """The windows of samples a fit reads on a series of ``n`` samples: the
    stretches of the period check with ``features="auto"``, the fit sample's
    windows (of the series in windows of ``window`` samples) unless ``"auto"``
    cut it from those stretches (sample by sample), and with ``wide`` the
    wider sample's (:func:`wide_fit_windows`)."""
    reads = stretch_windows(n, sample_size)[0] if auto else []
    if not (auto and window == 1):
        drawn = fit_windows(window_fit_length(n, window), sample_size)
        reads += [(a * window, b * window) for a, b in drawn]
    if wide:  # (a rare event: the whole series is looked at, not its epoch alone)
        reads += [(a * window, b * window) for a, b in wide_fit_windows(n // window)]
    return reads


def still_fits(
    record: FitRecord,
    features: str,
    n: int,
    channels: int,
    sample_size: int,
    seed: int | None,
    changed: list[tuple[int, int]],
) -> bool:
    """Whether ``record``'s fitted map is the fit of a series of ``n`` samples
    with these settings: the same settings, the same windows read, and every
    stored object under them of the same version.

    ``changed``: the samples ``[a, b)`` that may differ from those the record
    was fitted on (:meth:`kcpstream.inputs.provenance.Units.changed`: under
    stored objects of other versions, or of none then).
    """
    if (record.features, record.sample_size, record.seed, record.channels) != (
        features,
        sample_size,
        seed,
        channels,
    ):
        return False
    auto = features.strip().lower() == "auto"
    if auto and auto_window(record.cycle, n) != record.window:
        return False  # the same cycle, a window this length no longer allows
    if record.reads not in [
        tuple(fit_reads(n, auto, sample_size, record.window, wide)) for wide in (False, True)
    ]:
        return False
    return not any(a < d and c < b for a, b in record.reads for c, d in changed)


def seed_of(seed) -> int | None:
    """The seed as a fit record keeps it (a numpy integer as an int)."""
    return None if seed is None else int(seed)


class Fitted(NamedTuple):
    """A fitted map, whether its fit read the wider sample, and whether that
    sample was the whole series holding a single value."""

    fmap: FeatureMap
    wide: bool = False
    single_value: bool = False


def fitted_map(
    fmap: FeatureMap,
    signal: Signal,
    sample,
    cache: SampleCache,
    sample_size: int,
    answer_constant: bool = False,
) -> Fitted:
    """The feature map fitted on the series' fit sample (a copy: the caller's map
    stays unfitted), or the caller's fitted map once it matches the channels.

    A fit sample of a single value is widened (:func:`wide_fit_windows`)
    before the series is called constant.  One that is then the whole series
    has no scale to fit, and no change to find: with ``answer_constant`` (a
    rule that may choose no change-point) the map is fitted with a unit scale,
    every sample's features are the same, and the search finds none;
    otherwise the fit's error stands."""
    if fmap.is_fitted:
        if fmap.n_features_in_ != signal.d:
            raise InputError(
                f"the fitted feature map expects d={fmap.n_features_in_} channels but "
                f"{signal.description} has d={signal.d}; pass an unfitted map to refit"
            )
        return Fitted(fmap)
    fmap = copy.deepcopy(fmap)
    if sample is None:
        sample = fit_sample(signal, signal.fit_windows(sample_size), cache)
    wide = _single_value(sample) and len(sample) < min(signal.n, WIDE_FIT_POINTS)
    if wide:  # a rare event: look further before calling the series constant
        sample = fit_sample(signal, wide_fit_windows(signal.n), cache)
    if not np.isfinite(sample).all():
        raise NonFiniteInput(f"the fit sample of {signal.description} holds NaN or inf")
    single = answer_constant and len(sample) == signal.n and _single_value(sample)
    if single and isinstance(getattr(fmap, "bandwidth", None), str):
        fmap.bandwidth = 1.0  # any scale: one value has the same features at each
    try:
        fmap.fit(sample)
    except InputError as exc:  # (the map's message does not know which series it is)
        raise InputError(f"{signal.description}: {exc}") from None
    return Fitted(fmap, wide, single)


def _single_value(sample: np.ndarray) -> bool:
    """Whether every row of the sample is the same (and finite)."""
    rows = np.asarray(sample)
    return bool(rows.size) and bool((rows == rows[:1]).all())

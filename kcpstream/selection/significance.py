"""How sure a change-point is: a test for a split that holds under serial dependence.

The kernel cost's gain for splitting a segment of ``N`` samples at ``t`` is

``G(t) = N / (t (N - t)) * || S(t) - (t / N) S(N) ||^2``

with ``S`` the cumulative sum of the features.  Under the null hypothesis
of no change in the segment -- a stationary, weakly dependent feature
sequence -- ``S`` behaves like ``Sigma^{1/2} W`` for a Brownian motion ``W``,
with ``Sigma`` the *long-run* covariance of the features (the sum of their
autocovariances at every lag, not their covariance: serial dependence
inflates ``G`` by the long-run to short-run ratio, which is why a penalty
calibrated for independent samples puts change-points in any AR(1)).  Then
``G(t)`` is a weighted sum of squared standardised Brownian bridges.

Two approximations make that a p-value:

* **Three cumulants** (Pearson 1959; the central case of Liu, Tang & Zhang
  2009): ``G ~ a chi2_nu + delta`` with ``a = tr(Sigma^3) / tr(Sigma^2)``,
  ``nu = tr(Sigma^2)^3 / tr(Sigma^3)^2`` and
  ``delta = tr(Sigma) - tr(Sigma^2)^2 / tr(Sigma^3)`` (the same mean,
  variance and skewness).  Satterthwaite's ``c chi2_nu`` matches two: its
  tail falls as ``exp(-x / 2c)`` while a weighted sum of squares falls as
  ``exp(-x / 2 lambda_max)``, so with unequal weights (a kernel's
  features: a few large eigenvalues and many small ones) it understates
  the tail where the test is decided, by 2.5 to 12 times at a level of 0.01
  (``benchmarks/results/calibration.md``);
* **James, James & Siegmund (1987)**: for the maximum over
  ``t / N in [t0, 1 - t0]`` of a standardised squared bridge in ``nu``
  dimensions,
  ``P(max > b^2) ~ b^nu e^{-b^2/2} / (2^{nu/2} Gamma(nu/2)) *
  ((1 - nu / b^2) log((1 - t0)^2 / t0^2) + 4 / b^2)``.
  It is the continuous-time tail, which over-states the tail of the
  maximum over the positions of a segment, most for short segments and
  near their ends; each position's share of it is multiplied by Siegmund's
  overshoot factor ``nu`` (Siegmund & Yakir 2007), which corrects that for
  a walk of as many independent steps as the segment holds (fewer, for
  dependent samples: see :func:`split_pvalue`).

``Sigma`` is estimated from the block statistics of the data pass (no extra
pass): sums over batches of ``ell`` samples and their consecutive
differences (a mean change affects one difference, not all of them; one
that is implausibly large under the others' spread is left out), at batch
lengths doubling until the estimate stops changing, each also extrapolated
for the bias of short batches (:func:`long_run_noise`).  Dependence and
cycles at the scale the batches reach count as noise, not as change.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from statistics import NormalDist

import numpy as np

from kcpstream._kernels.batches import batch_difference_tiles
from kcpstream._kernels.span import overshoot_at, span_quadrature

__all__ = [
    "BatchSums",
    "LongRunNoise",
    "long_run_noise",
    "cycle_noise",
    "split_pvalue",
    "discrete_span",
    "overshoot",
    "DEFAULT_ALPHA",
]

#: Default level of each split's test (the chance that a series without any
#: change gets a change-point, up to the approximations' error).
DEFAULT_ALPHA = 0.01
#: Fewest batches a long-run covariance is estimated from.
MIN_BATCHES = 16
#: A batch difference larger than this quantile of its null law is a change, not noise.
OUTLIER_QUANTILE = 0.999


@dataclass(frozen=True)
class LongRunNoise:
    """The long-run covariance of the features, as the tests use it.

    Attributes
    ----------
    trace : float
        ``tr(Sigma)``: the expected gain of a split at a fixed position
        without change (feature units).
    scale : float
        ``c = tr(Sigma^2) / tr(Sigma)``.
    dof : float
        ``nu = tr(Sigma)^2 / tr(Sigma^2)``, the effective degrees of freedom.
    batch : int
        Samples per batch the estimate comes from.
    n_batches : int
        Batch differences used (after leaving out the outliers).
    local : float
        The trace of the whole series' short-range covariance at
        :func:`local_batch`'s length, which a segment's own is compared with
        (:func:`local_noise`).
    tail_scale : float
        ``a = tr(Sigma^3) / tr(Sigma^2)``, the scale of the law matched to
        the gain's first three cumulants (:func:`split_pvalue`); 0 when
        unknown (Satterthwaite's two-moment law, ``a = c``).
    cycle_trace, cycle_frob, cycle_cube : float
        Where consecutive batches were anti-correlated (a cycle longer than
        the batches, which longer ones average out): ``tr(R)``,
        ``||R||_F`` and ``tr(R^3)^(1/3)`` of ``R``, the covariance of the
        sums over the batches set aside less its long-run part (its
        positive part), at their largest; 0 otherwise.  The long-run covariance describes sums
        over whole cycles; a split inside a cycle carries a part of one,
        whose spread ``R`` bounds (:func:`cycle_noise`).
    """

    trace: float
    scale: float
    dof: float
    batch: int
    n_batches: int
    local: float = 0.0
    cycle_trace: float = 0.0
    cycle_frob: float = 0.0
    tail_scale: float = 0.0
    cycle_cube: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> LongRunNoise:
        return cls(**data)


def _chi2_ratio(dof: float, q: float) -> float:
    """``q``-quantile of ``chi2_dof`` divided by its median (Wilson-Hilferty)."""
    z = NormalDist().inv_cdf(q)

    def quantile(zz: float) -> float:
        a = 2.0 / (9.0 * dof)
        return dof * max(1.0 - a + zz * math.sqrt(a), 1e-6) ** 3

    return quantile(z) / quantile(0.0)


def _kept(
    gram, ss: np.ndarray, rounds: int, base: np.ndarray | None = None, cov: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """Mask of the batch differences, with squared norms ``ss``, that are not
    implausibly large under the spread of the others: beyond the
    :data:`OUTLIER_QUANTILE` of their null law (a chi2 with the covariance's
    effective degrees of freedom, scaled to the median) a difference is a
    change, not noise.  Only the differences of ``base`` (a mask; all by
    default) are looked at.  Each round takes the degrees of freedom from the
    differences the previous one kept.  Returns the mask and, with ``cov``,
    ``D D^T`` over the differences it keeps (unnormalised; ``gram(mask)``
    computes it, once for a mask: most rounds keep every difference)."""
    base = np.ones(ss.shape[0], dtype=bool) if base is None else base
    keep = base
    # discrete data (sparse counts, flags) can have most differences exactly 0:
    # their median says nothing of the spread, the mean (larger, so fewer
    # differences are left out) does
    looked = ss[base]
    middle = (_median(looked) or float(np.mean(looked))) if looked.size else 0.0
    sigma, of = None, None  # sigma = D D^T over the differences ``of``
    for _ in range(rounds):
        sigma, of = _gram(gram, keep, sigma, of), keep
        tr, tr2 = float(np.trace(sigma)), float((sigma * sigma).sum())
        if not tr > 0:  # no variation between batches but at the outliers: noise-free
            break
        cut = middle * _chi2_ratio(max(tr * tr / tr2, 1.0), OUTLIER_QUANTILE)
        keep = base & (ss <= cut)
    return keep, _gram(gram, keep, sigma, of) if cov else None


def _median(a: np.ndarray) -> float:
    """``np.median`` of a 1-D array without NaN, the same bits, from one
    partition (a choice takes a few thousand medians of a few thousand values:
    ``np.median``'s checks were a third of their cost)."""
    k = a.size // 2
    if a.size % 2:
        return float(np.partition(a, k)[k])
    part = np.partition(a, (k - 1, k))
    return float((part[k - 1] + part[k]) / 2.0)


def _gram(gram, keep: np.ndarray, sigma, of) -> np.ndarray:
    """``gram(keep)`` (``sigma`` when it is that product's for the same mask ``of``)."""
    if of is not None and np.array_equal(of, keep):
        return sigma
    return gram(keep)


#: Batch differences per tile of :meth:`BatchSums.gram` (a tile's product is
#: computed once per mask of its columns).
GRAM_TILE = 256


class BatchSums:
    """The consecutive differences of a series' batch sums at each batch length,
    and their products ``D D^T`` over masks of them.

    The estimate of the long-run covariance is made again with each set of
    change-points left out, and each estimate leaves out outliers in two
    rounds: the products over masks that differ in a few differences.  The
    product is a sum over tiles of :data:`GRAM_TILE` differences, each
    computed once per mask of its own differences, so a mask that changes
    a few of them recomputes a few tiles.  Every product is summed over the
    same tiles in the same order: the same mask gives the same bits,
    whichever masks came before.

    Parameters
    ----------
    prefix : numpy.ndarray, shape (p, m + 1)
        As :func:`long_run_noise` takes it.
    """

    def __init__(self, prefix: np.ndarray) -> None:
        self.prefix = np.asarray(prefix, dtype=np.float64)
        self._levels: dict[int, tuple[int, list[np.ndarray], np.ndarray]] = {}
        self._products: dict[tuple[int, int, bytes], np.ndarray] = {}

    def level(self, per_batch: int) -> tuple[int, list[np.ndarray], np.ndarray]:
        """``(k, tiles, ss)``: the number ``k`` of whole batches of ``per_batch``
        grid steps, the consecutive differences ``D`` (p, k - 1) of their sums
        in tiles of :data:`GRAM_TILE` columns (contiguous: a product over all
        of one reads it as it lies), and the squared norms of ``D``
        (:func:`~kcpstream._kernels.batches.batch_difference_tiles`; ``D`` is
        held once, in its tiles)."""
        got = self._levels.get(per_batch)
        if got is None:
            k, T, ss = batch_difference_tiles(self.prefix, per_batch, GRAM_TILE)
            width = ss.shape[0]
            tiles = list(T)
            if width % GRAM_TILE:  # the last tile without its padding
                tiles[-1] = np.ascontiguousarray(tiles[-1][:, : width % GRAM_TILE])
            got = self._levels[per_batch] = (int(k), tiles, ss)
        return got

    def gram(self, per_batch: int, keep: np.ndarray) -> np.ndarray:
        """``D D^T`` over the differences ``keep`` at batches of ``per_batch`` steps."""
        tiles = self.level(per_batch)[1]
        p = self.prefix.shape[0]
        total = np.zeros((p, p))
        # each tile's mask as bytes, from one packing of the whole mask (a tile
        # of GRAM_TILE bits is GRAM_TILE // 8 whole bytes; the last is padded
        # with zeros either way)
        packed = np.packbits(keep).tobytes()
        width = GRAM_TILE // 8
        for i, cols in enumerate(tiles):
            key = (per_batch, i, packed[i * width : (i + 1) * width])
            product = self._products.get(key)
            if product is None:
                mask = keep[i * GRAM_TILE : (i + 1) * GRAM_TILE]
                part = cols if mask.all() else cols[:, mask]
                product = self._products[key] = part @ part.T
            total += product
        return total

    def lag_products(self, per_batch: int) -> np.ndarray:
        """``sum_i D[i, j + 1] D[i, j]`` for each ``j`` (k - 2 of them), as
        ``np.einsum("ij,ij->j", D[:, 1:], D[:, :-1])`` gives them, from the tiles."""
        tiles = self.level(per_batch)[1]
        parts = []
        for i, cols in enumerate(tiles):
            if i:  # the pair across the boundary with the tile before
                pair = np.stack([tiles[i - 1][:, -1], cols[:, 0]], axis=1)
                parts.append(np.einsum("ij,ij->j", pair[:, 1:], pair[:, :-1]))
            parts.append(np.einsum("ij,ij->j", cols[:, 1:], cols[:, :-1]))
        return np.concatenate(parts) if parts else np.zeros(0)


def _clear_of(exclude: np.ndarray, per_batch: int, k: int) -> np.ndarray:
    """Mask of the ``k - 1`` differences of consecutive batch sums that touch no
    batch holding a position of ``exclude`` (grid steps): a change at ``c``
    moves the batch holding it (and, on a boundary, the one before)."""
    hit = np.zeros(k + 1, dtype=bool)
    hit[np.minimum(exclude // per_batch, k)] = True
    hit[np.maximum((exclude - 1) // per_batch, 0)] = True
    return ~(hit[:-2] | hit[1:-1] | hit[2:])


def _batch_estimate(sums: BatchSums, per_batch: int, ell: int, exclude: np.ndarray):
    """Covariance estimate from batches of ``per_batch`` grid steps (``ell`` samples):
    ``(Sigma, used)``, or None with too few batches.  Differences of two
    batches that hold a position of ``exclude`` (in grid steps) are left out."""
    k, _, ss = sums.level(per_batch)
    if k < MIN_BATCHES:
        return None
    base = None
    if exclude.size:
        base = _clear_of(exclude, per_batch, k)
        if int(base.sum()) < MIN_BATCHES // 2:
            return None
    keep, sigma = _kept(lambda m: sums.gram(per_batch, m), ss, rounds=2, base=base)
    used = int(keep.sum())
    if used < MIN_BATCHES // 2:
        return None
    return sigma / (2.0 * ell * used), used


#: Standard errors by which a longer batches' estimate must exceed the shorter's
#: to count as more dependence uncovered.
GROW_Z = 2.0
#: ... and fall below it to count as anti-correlated batches averaged out (a rare
#: event by chance, since it discards the larger, conservative estimate).
SHRINK_Z = 4.0


def _change(before: np.ndarray, sigma: np.ndarray, used: int) -> int:
    """+1 when the trace grew from ``before`` to ``sigma`` by more than
    :data:`GROW_Z` standard errors of a trace estimated from ``used``
    differences (relative ``sqrt(2 / (used nu))`` for ``nu`` effective
    degrees of freedom), -1 when it shrank by more than :data:`SHRINK_Z` of
    them, 0 otherwise."""
    tr0, tr = float(np.trace(before)), float(np.trace(sigma))
    if not tr0 > 0:
        return int(tr > 0)
    tr2 = float((sigma * sigma).sum())
    dof = tr * tr / tr2 if tr2 > 0 else 1.0
    se = math.sqrt(2.0 / (max(used, 1) * max(dof, 1.0)))
    if tr > tr0 * (1.0 + GROW_Z * se):
        return 1
    return -1 if tr < tr0 * (1.0 - SHRINK_Z * se) else 0


def _estimates(sums: BatchSums, block_size: int, steps: np.ndarray):
    """:func:`_batch_estimate` of ``sums`` without the change-points ``steps``
    at ``k`` grid steps, as a function of ``k``, each length's made once: the
    look past a plateau (:func:`_grows_later`) makes the longer ones the
    doubling then goes on to when it finds growth."""
    made: dict[int, tuple[np.ndarray, int] | None] = {}

    def estimate(k: int) -> tuple[np.ndarray, int] | None:
        if k not in made:
            made[k] = _batch_estimate(sums, k, k * block_size, steps)
        return made[k]

    return estimate


#: Fewest batch differences an estimate past a plateau is looked at from
#: (:func:`_grows_later`).
LOOK_DIFFERENCES = 256


def _grows_later(sums: BatchSums, per_batch: int, estimate_at, sigma: np.ndarray) -> bool:
    """Whether an estimate at longer batches than the plateau's (``sigma``, at
    ``per_batch`` grid steps) lies well above it (:func:`_change`), both from
    the differences clear of the change-points left out (``estimate_at(k)``:
    :func:`_batch_estimate` at ``k`` grid steps without them); only estimates
    from at least :data:`LOOK_DIFFERENCES` differences are looked at.

    A slow component under white noise (a wandering level measured with
    noise) grows the estimate by too little from one doubling to the next
    for any one step to be significant: the plateau is then the white
    noise's, every wander of the level tests as a change, and left out as
    changes those change-points take the longer batches with them.  Once the
    change-points found are left out, a longer batch's growth is the
    noise's: the changes that moved its differences are set aside.  Longer
    batches from fewer differences are not looked at: there the spread of
    the changes the test has not found yet moves too many of them."""
    # (k batches of per_batch steps: k // 2 of twice as many, k // 2 - 1 differences)
    while sums.level(per_batch)[0] // 2 - 1 >= LOOK_DIFFERENCES:
        per_batch *= 2
        later = estimate_at(per_batch)
        if later is None:
            return False
        estimate, used = later
        if used < LOOK_DIFFERENCES:  # (the change-points left out took the rest)
            return False
        if _change(sigma, estimate, used) > 0:
            return True
    return False


#: Largest lag-one correlation of batch sums an extrapolation uses.
MAX_BATCH_CORRELATION = 0.9
#: Standard errors (``sqrt((1 - rho^2) / pairs)``) added to that correlation
#: where the estimate did not level off (the conservative side of it).
UNLEVELLED_RHO_SE = 1.0


def _ar1_factor(
    sums: BatchSums, per_batch: int, exclude: np.ndarray, unlevelled: bool = False
) -> float:
    """``(1 + rho) / (1 - rho)``: the long-run variance of an AR(1) sequence of
    batch sums with lag-one correlation ``rho`` over their variance.

    ``rho`` comes from the consecutive differences ``D`` of the sums over
    batches of ``per_batch`` grid steps, not from the sums: for an AR(1),
    ``corr(D_i, D_i+1) = -(1 - rho) / 2``, and a change of level moves one
    difference (left out as an outlier, like those around ``exclude``), where
    it would make every sum look correlated.  Pooled over the features;
    ``rho`` is kept in ``[0, MAX_BATCH_CORRELATION]``.  ``unlevelled``: the
    estimate did not level off, and ``rho`` is taken
    :data:`UNLEVELLED_RHO_SE` standard errors higher.
    """
    k, _, ss = sums.level(per_batch)
    keep, _ = _kept(lambda m: sums.gram(per_batch, m), ss, rounds=2, cov=False)
    if exclude.size:
        keep &= _clear_of(exclude, per_batch, k)
    pairs = keep[1:] & keep[:-1]
    denom = float(ss[keep].sum())
    if not denom > 0 or not pairs.any():
        return 1.0
    # each pair's product summed over the features, then over the pairs kept
    # (from the tiles: the differences are held once)
    lag1 = float(sums.lag_products(per_batch)[pairs].sum())
    n_pairs = int(pairs.sum())
    # the same normalisation as the pairs' own: mean product over mean square
    r_d = (lag1 / n_pairs) / (denom / int(keep.sum()))
    rho = min(max(1.0 + 2.0 * r_d, 0.0), MAX_BATCH_CORRELATION)
    if unlevelled:
        # the dependence outlasts the longest batches, which are few: the factor
        # is steep in rho there (at rho = 0.8 from 20 pairs one standard error,
        # 0.13, doubles it), and falling short makes noise a change
        se = math.sqrt((1.0 - rho * rho) / n_pairs)
        rho = min(rho + UNLEVELLED_RHO_SE * se, MAX_BATCH_CORRELATION)
    return (1.0 + rho) / (1.0 - rho)


def long_run_noise(
    prefix: np.ndarray,
    block_size: int,
    exclude: np.ndarray | None = None,
    *,
    extrapolate: bool = True,
    short: tuple[int, np.ndarray] | None = None,
    shortest: int = 0,
) -> LongRunNoise | None:
    """Estimate the features' long-run covariance from prefix sums on a block grid.

    Batch-means estimates ``T(ell)`` at batch lengths ``ell = block_size * 2^j``
    (at least :data:`MIN_BATCHES` batches) fall short of the long-run
    covariance by about ``a / ell`` for a short-memory series, so each is
    also extrapolated, ``2 T(ell) - T(ell / 2)`` (Richardson).  ``ell``
    doubles while the trace grows by more than twice its standard error
    (dependence still being uncovered); past that plateau longer batches
    would mostly add the spread of the changes between them.  Without the
    change-points ``exclude``, a plateau must also hold at each longer batch
    length estimated from at least :data:`LOOK_DIFFERENCES` differences
    (:func:`_grows_later`): a slow component under white noise shows only
    there, and a change-point search that took its wander for changes would
    otherwise shrink the estimate it is tested against.  Of the
    estimates seen, the one with the largest trace is kept: the conservative
    side, since an under-estimate makes every split look significant.  Only
    an estimate far below the previous one (by :data:`SHRINK_Z` standard
    errors) sets the shorter ones aside: consecutive batches were
    anti-correlated (windows of half a cycle alternate between its halves),
    which short batches over-state and longer ones average out.

    A short series may run out of batches before the plateau: its dependence
    outlasts the longest batches it holds (an AR(1) with phi = 0.95 over 100
    samples), and the estimate falls short.  With ``extrapolate``, the kept
    estimate is then multiplied by ``(1 + rho) / (1 - rho)``, the long-run to
    short-run ratio of an AR(1) sequence of batch sums, with ``rho`` from the
    lag-one correlation of the longest batches' differences, one standard
    error higher (:func:`_ar1_factor`; a change of level moves one difference
    only; the few longest batches leave ``rho`` uncertain where the factor is
    steepest, and an estimate that falls short makes noise a change).  At a
    plateau too, with ``rho`` of the kept batches: on a short series the
    growth stops being significant for want of batches (an AR(1) with
    phi = 0.5 over 100 samples kept batches of 1 or 2 samples), and past a
    true plateau ``rho`` is about 0.

    Parameters
    ----------
    prefix : numpy.ndarray, shape (p, m + 1), or BatchSums
        Sums of the features (feature units) over ``[0, j * block_size)``
        for ``j = 0 .. m`` (full blocks only), or a :class:`BatchSums` of
        them (which keeps its work for the next estimate of the same series).
    block_size : int
        Samples per grid step.
    exclude : numpy.ndarray, optional
        Change-points (samples) already accepted: the batch differences
        around them are left out, so that the changes themselves are not
        taken for noise.
    extrapolate : bool
        Extrapolate an estimate that did not level off (see above).
    short : tuple of (int, numpy.ndarray), optional
        ``(ell, C)``: a short-range covariance of the whole series at batches
        of ``ell`` samples that keeps the regimes the estimate above leaves
        out as changes (:func:`robust_cov`): where its batches, shorter than
        those of the estimate kept, vary more than their long-run part (a
        cycle in one part of the series), it counts as a part of a cycle
        (``cycle_trace``) as the batches set aside do.
    shortest : int
        Samples over which the samples are known to depend on each other (the
        span :func:`~kcpstream.selection.neighbours.serial_dependence` found):
        no plateau is taken at shorter batches, which cannot hold that
        dependence (a white noise over smooth shapes levels off at batches of
        a sample or two, the noise's alone), unless the estimate is 0 (no
        noise at any length).  Where the series runs out of batches first,
        after a step that did not grow the estimate, it is extrapolated as at
        a plateau.

    Returns
    -------
    LongRunNoise or None
        None when there are fewer than :data:`MIN_BATCHES` batches; a
        ``trace`` of 0 when the batch sums do not vary (a noise-free signal).
    """
    sums = prefix if isinstance(prefix, BatchSums) else BatchSums(prefix)
    steps = (
        np.zeros(0, np.int64) if exclude is None else np.asarray(exclude, np.int64) // block_size
    )
    best = None
    previous = None
    per_batch = 1
    plateau = False
    seen: list[tuple[int, np.ndarray]] = []  # (ell, estimate) at each length so far
    set_aside = 0  # how many of them an anti-correlation set aside
    levelled = False  # the last step did not grow the estimate significantly
    estimate = _estimates(sums, block_size, steps)
    while True:
        ell = per_batch * block_size
        est = estimate(per_batch)
        if est is None:
            break
        sigma, used = est
        change = 1 if previous is None else _change(previous, sigma, used)
        if change < 0:
            # shorter batches over-stated it: consecutive batches anti-correlated
            # (windows of half a cycle alternate), which longer ones average out;
            # what a part of a cycle sums to is kept for splits inside one
            best = None
            set_aside = len(seen)
        seen.append((ell, sigma))
        candidates = [sigma]
        if previous is not None and change >= 0:
            candidates.append(2.0 * sigma - previous)
        for cand in candidates:
            tr = float(np.trace(cand))
            if best is None or tr > best[0]:
                best = (tr, cand, ell, used)
        # the plateau: longer batches would only add the changes' own spread; but
        # not below the span the samples are known to depend over, nor, once
        # change-points are left out, where a longer batch still grows
        # (_grows_later).  An estimate of 0 is no noise at any length.
        if change == 0 and (
            not float(np.trace(sigma)) > 0
            or (
                ell >= shortest
                and not (steps.size > 0 and _grows_later(sums, per_batch, estimate, sigma))
            )
        ):
            plateau = True
            break
        levelled = change == 0  # (the doubling went on past a level step: shortest)
        previous = sigma
        per_batch *= 2
    if best is None:
        return None
    _, sigma, ell, used = best
    if extrapolate and previous is not None:
        # still growing at the longest batches the series holds: the dependence
        # outlasts them, and the estimate falls short; the batch sums' own lag-one
        # correlation extrapolates it as an AR(1) of batches would.  At a plateau
        # too (where the growth stopped being significant, which on a short
        # series is also where there are too few batches to see it), with the
        # kept batches' correlation: about 0 past a true plateau.  Batches that
        # ran out below ``shortest`` on a level step are such a plateau too
        flat = plateau or levelled
        batches = ell // block_size if flat else per_batch // 2
        sigma = sigma * _ar1_factor(sums, batches, steps, unlevelled=not flat)
    # what the sums over the batches set aside hold beyond the long-run part
    # ell Sigma (its positive part: the directions where they vary more): the
    # spread of a part of a cycle
    candidates = seen[:set_aside]
    if short is not None and short[0] < ell:  # shorter than the batches kept
        candidates.append(short)
    return _noise(sigma, int(ell), used, candidates)


def _noise(sigma: np.ndarray, ell: int, used: int, candidates: list) -> LongRunNoise:
    """The :class:`LongRunNoise` of the long-run covariance ``sigma`` (from
    ``used`` differences of batches of ``ell`` samples), with the part of a
    cycle that the covariances ``candidates`` (``(ell_j, S_j)``) hold beyond it."""
    tr, tr2 = float(np.trace(sigma)), float((sigma * sigma).sum())
    cycle_terms = {}
    parts = [np.clip(np.linalg.eigvalsh(e * (s_j - sigma)), 0.0, None) for e, s_j in candidates]
    if parts and max(float(r.sum()) for r in parts) > 0:
        cycle = max(parts, key=np.sum)
        cycle_terms = {
            "cycle_trace": float(cycle.sum()),
            "cycle_frob": float(np.sqrt((cycle * cycle).sum())),
            "cycle_cube": float(np.cbrt((cycle**3).sum())),
        }
    if not tr > 0 or not tr2 > 0:  # noise-free: any change is certain, no change is none
        return LongRunNoise(0.0, 0.0, 0.0, ell, used, **cycle_terms)
    # (an extrapolated estimate may have small negative eigenvalues: no weight)
    tr3 = float((np.clip(np.linalg.eigvalsh(sigma), 0.0, None) ** 3).sum())
    return LongRunNoise(
        trace=tr,
        scale=tr2 / tr,
        dof=tr * tr / tr2,
        batch=ell,
        n_batches=used,
        tail_scale=max(tr3 / tr2, tr2 / tr),
        **cycle_terms,
    )


def cycle_noise(noise: LongRunNoise, length: int, trim: int, split: int) -> LongRunNoise:
    """The noise a split at ``split`` of a segment of ``length`` samples (at
    least ``trim`` on each side) is tested against, where the series has a
    cycle longer than its batches (``noise.cycle_trace > 0``).

    Between two positions on the same phase of the cycle the bridge
    ``B(t) = S(t) - (t / N) S(N)`` of a segment ``[a, e)`` moves by the
    long-run covariance ``Sigma``.  Its ends and the split fall anywhere in a
    cycle: with ``C(x)`` the sum over the part of a cycle before ``x`` (less
    its mean), ``B`` also holds ``C(t) - (1 - t / N) C(a) - (t / N) C(e)``,
    of covariance at most ``2 Cov(C)``, and ``2 Cov(C)`` is the mean over a
    cycle of the covariance of sums over ``ell`` samples beyond their
    long-run part ``ell Sigma``: at most ``R``, the largest of the batch
    sums' before they averaged out.  The gain weighs
    the bridge by ``N / (t (N - t))``, so a split at ``t`` sees
    ``V(t) = Sigma + N R / (t (N - t))``: near a segment's ends, the cycle's
    own spread; in a long segment's middle, the long-run covariance.

    The test of the split found is that of the largest ``G(t) / tr V(t)``
    over the positions, at the value of the split found (no larger than that
    maximum, so the p-value stays valid).  Its degrees of freedom are the
    fewest of ``V`` over the positions (at ``trim`` or in the middle: the
    heavier tail), and ``||.||_F`` and ``tr(.^3)^(1/3)`` of the sum are
    bounded by the sums of the norms (the triangle inequality).
    """
    if not noise.cycle_trace > 0 or length < 2 * trim:
        return noise
    trim = max(trim, 1)
    split = min(max(split, trim), length - trim)

    def mixture(t: int) -> tuple[float, float, float]:
        weight = length / (t * (length - t))
        trace = noise.trace + weight * noise.cycle_trace
        frob = math.sqrt(noise.scale * noise.trace) + weight * noise.cycle_frob
        # the Schatten 3-norm's triangle inequality, as the Frobenius norm's above
        cube = math.cbrt(tail_scale(noise) * noise.scale * noise.trace)
        cube += weight * noise.cycle_cube
        return trace, trace * trace / (frob * frob), cube**3 / (frob * frob)

    trace, dof, tail = mixture(split)
    dof = min(dof, mixture(trim)[1], noise.dof if noise.trace > 0 else dof)
    scale = trace / dof
    return replace(noise, trace=trace, scale=scale, dof=dof, tail_scale=max(tail, scale))


#: Batches the local noise level of a segment is measured on, at most, in the whole series.
LOCAL_BATCHES = 4096
#: Fewest batches inside a segment for its own noise level to count.
MIN_LOCAL_BATCHES = 8


def local_batch(n: int, block_size: int) -> int:
    """Batch length (a multiple of ``block_size``) of the local noise levels."""
    steps = max(1, -(-n // (LOCAL_BATCHES * block_size)))
    return steps * block_size


class RangeGrams:
    """``D D^T`` over masks of column ranges ``[lo, hi)`` of one series' batch
    differences ``D`` (p, k): the segments a choice tests.

    The segments of a path overlap, and most of a segment's differences are
    kept: the product is a sum over the tiles of :data:`GRAM_TILE` columns
    of ``D`` that the range meets (from its first), each part computed once
    per range within its tile and mask of it.  The same range and mask give
    the same bits, whichever came before; a product over the whole of ``D``
    of one matrix product was most of the choice of a batch of short
    series (``benchmarks/results/throughput.md``)."""

    def __init__(self, diffs: np.ndarray) -> None:
        self.diffs = diffs
        self.ss = (diffs**2).sum(axis=0)  # (a column's sum is the same in any slice)
        self._products: dict[tuple[int, int, bytes], np.ndarray] = {}

    def gram(self, lo: int, hi: int, keep: np.ndarray) -> np.ndarray:
        """``D[:, lo:hi][:, keep] @ D[:, lo:hi][:, keep].T``, by tiles."""
        total = np.zeros((self.diffs.shape[0],) * 2)
        for t in range(lo // GRAM_TILE, -(-hi // GRAM_TILE)):
            a, b = max(lo, t * GRAM_TILE), min(hi, (t + 1) * GRAM_TILE)
            mask = keep[a - lo : b - lo]
            whole = bool(mask.all())
            key = (a, b, b"" if whole else np.packbits(mask).tobytes())
            product = self._products.get(key)
            if product is None:
                part = np.ascontiguousarray(
                    self.diffs[:, a:b] if whole else self.diffs[:, a:b][:, mask]
                )
                product = self._products[key] = part @ part.T
            total += product
        return total


def robust_cov(
    diffs: np.ndarray, batch: int, grams: RangeGrams | None = None, lo: int = 0
) -> np.ndarray:
    """``sum D D^T / (2 batch k)`` over the ``k`` batch differences ``D`` (p, k)
    that :func:`_kept` keeps (one round); ``D`` is ``grams``' columns from
    ``lo`` when given (its products by tiles)."""
    if grams is None:
        grams, lo = RangeGrams(diffs), 0
    hi = lo + diffs.shape[1]
    keep, sigma = _kept(lambda m: grams.gram(lo, hi, m), grams.ss[lo:hi], rounds=1)
    return sigma / (2.0 * batch * max(int(keep.sum()), 1))


def segment_spread(
    diffs: np.ndarray, batch: int, grams: RangeGrams | None = None, lo: int = 0
) -> tuple[float, float, float] | None:
    """``(tr(Sigma), tr(Sigma^2), tr(Sigma^3) / tr(Sigma^2))`` of a segment's
    short-range covariance :func:`robust_cov`, from ``diffs`` (p, k), the
    consecutive differences of its batch sums (``grams``' from ``lo``, when
    given); None with fewer than :data:`MIN_LOCAL_BATCHES` of them or none
    varying.  It does not depend on the series' noise, so a search that
    tests a segment again against a new estimate of it reuses this."""
    if diffs.shape[1] < MIN_LOCAL_BATCHES:
        return None
    sigma = robust_cov(diffs, batch, grams, lo)
    tr, tr2 = float(np.trace(sigma)), float((sigma * sigma).sum())
    if not tr > 0:
        return None
    # a product of differences with itself: no negative eigenvalue but by
    # rounding, and tr(Sigma^3) is a product's, not an eigendecomposition's
    tr3 = float((sigma * (sigma @ sigma)).sum())
    return tr, tr2, tr3 / tr2


def local_noise(spread: tuple[float, float] | None, noise: LongRunNoise) -> LongRunNoise:
    """The noise a segment is tested against: the series' long-run covariance, or
    the segment's own where it is larger.

    A kernel's features vary more, and in other directions, in some regimes
    than in others, so the covariance pooled over the whole series can
    understate one segment's: its spread ``c`` and degrees of freedom set
    the test's tail.  With :data:`MIN_LOCAL_BATCHES` batches inside the
    segment, its short-range covariance (at :func:`local_batch`'s length,
    ``spread`` from :func:`segment_spread`), inflated by the series'
    long-run to short-range ratio, is compared, and the larger trace and
    the larger ``c`` are kept: a local estimate from few batches may fall
    short by chance, which must not make the test liberal.
    """
    if spread is None or not noise.local > 0:
        return noise
    tr, tr2, tail = spread
    # below 1 when the series' batches are anti-correlated (windows of half a
    # cycle); a long-run estimate of 0 (no spread between batches) says nothing of
    # a segment that has its own
    inflation = noise.trace / noise.local if noise.trace > 0 else 1.0
    trace = max(noise.trace, tr * inflation)
    scale = max(noise.scale, tr2 / tr * inflation)
    tail = max(tail_scale(noise), tail * inflation, scale)
    if trace == noise.trace and scale == noise.scale and tail == tail_scale(noise):
        return noise
    return replace(noise, trace=trace, scale=scale, dof=max(trace / scale, 1e-9), tail_scale=tail)


def tail_scale(noise: LongRunNoise) -> float:
    """The scale ``a`` of the three-cumulant law of ``noise`` (:func:`split_pvalue`):
    its ``tail_scale``, never below Satterthwaite's ``c`` (an unknown one is ``c``)."""
    return max(noise.tail_scale, noise.scale)


def overshoot(x: np.ndarray) -> np.ndarray:
    """Siegmund's ``nu(x)``: the factor by which a random walk whose steps have
    standard deviation ``x`` (in units of the boundary's scale) exceeds a
    boundary less often than Brownian motion, which crosses it between the
    steps too; 1 at ``x = 0``, about ``exp(-0.583 x)`` for small ``x``
    (the approximation of Siegmund & Yakir, 2007, eq. 4.38), element by
    element (:func:`~kcpstream._kernels.span.overshoot_at`, which
    :func:`discrete_span` integrates)."""
    x = np.asarray(x, dtype=np.float64)
    return np.array([overshoot_at(v) for v in x.ravel().tolist()]).reshape(x.shape)


#: Points of the quadrature over the split's position (on the log-odds scale).
SPAN_NODES = 65


def discrete_span(b: float, t0: float, steps: float) -> float:
    """The span term of the tail for a maximum over ``steps`` positions:
    ``integral over [t0, 1 - t0] of nu(b / sqrt(steps t (1 - t))) dt / (t (1 - t))``.

    The continuous maximum's span is ``2 log((1 - t0) / t0)`` (``nu = 1``); a
    split is chosen among the positions of a segment, not along a continuum,
    and the standardised bridge steps by ``1 / sqrt(steps t (1 - t))`` from
    one position to the next: largest near the ends, where the continuous
    formula counts crossings no walk of that length makes.  Trapezoid rule
    over ``log(t / (1 - t))``, where the integrand is smooth, compiled
    (:func:`~kcpstream._kernels.span.span_quadrature`)."""
    return float(span_quadrature(b, math.log((1.0 - t0) / t0), steps, SPAN_NODES))


def split_pvalue(
    gain: float, length: int, trim: int, noise: LongRunNoise, steps: float | None = None
) -> float:
    """p-value of the best split of a segment of ``length`` samples.

    Parameters
    ----------
    gain : float
        The largest gain over the admissible splits (feature units).
    length : int
        Samples in the segment.
    trim : int
        Fewest samples on each side of an admissible split (``min_size``).
    noise : LongRunNoise
        The long-run covariance of the features.
    steps : float, optional
        Positions the maximum is taken over, as independent steps: the tail
        of the maximum over a grid (:func:`discrete_span`) instead of the
        continuous one, which over-states it most for short segments.  For
        dependent samples, ``length`` times the long-run to short-range
        variance ratio (a walk whose steps are correlated moves as one of
        fewer, larger steps would).  None: the continuous tail.

    Returns
    -------
    float
        An upper bound, approximately, on the chance of a gain at least this
        large in a segment without change, in [0, 1].
    """
    if not gain > 0:
        return 1.0
    if not noise.trace > 0:
        return 0.0
    # the gain at a position as a chi2_nu + delta (three cumulants; with a = c
    # it is Satterthwaite's c chi2_nu, delta = 0): the maximum's tail is that
    # of chi2_nu's at (gain - delta) / a
    a = tail_scale(noise)
    c2 = noise.scale * noise.trace  # tr(Sigma^2)
    nu = c2 / (a * a)
    b2 = (gain - (noise.trace - c2 / a)) / a
    if b2 <= nu:  # below the mean of the maximum's law
        return 1.0
    t0 = min(max(trim, 1) / max(length, 2), 0.5)
    span = 2.0 * math.log((1.0 - t0) / t0) if t0 < 0.5 else 0.0
    if steps is not None and span > 0:
        span = discrete_span(math.sqrt(b2), t0, steps)
    log_head = 0.5 * nu * math.log(b2) - 0.5 * b2 - 0.5 * nu * math.log(2.0) - math.lgamma(0.5 * nu)
    body = (1.0 - nu / b2) * span + 4.0 / b2
    if body <= 0:
        return 1.0
    return float(min(1.0, math.exp(log_head + math.log(body))))

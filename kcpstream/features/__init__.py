"""Feature maps: low-rank approximations of a kernel, and the registry.

A map is chosen by instance (``RFF(n_features=128, seed=1)``) or by a short
spec string ``"name"`` or ``"name:p"`` (``"rff:64"``, ``"orf:64"``,
``"matern:64"``, ``"quadrature:32"``, ``"nystrom:32"``, ``"linear"``), with
any of the map's parameters as ``key=value`` (``"quadrature:bandwidth=0.5"``,
``"rff:32,bandwidth=2.5"``), through :func:`make_feature_map`.
"""

from __future__ import annotations

from kcpstream.errors import InputError, NotFittedError
from kcpstream.features.base import FeatureMap
from kcpstream.features.linear import Linear
from kcpstream.features.matern import MaternRFF
from kcpstream.features.nystrom import Nystrom
from kcpstream.features.orthogonal import ORF
from kcpstream.features.quadrature import QuadratureFF
from kcpstream.features.registry import (
    FEATURE_MAPS,
    get_feature_map_class,
    register_feature_map,
)
from kcpstream.features.rff import RFF, FourierFeatures
from kcpstream.features.sketched import SketchedNystrom
from kcpstream.features.temporal import Temporal
from kcpstream.features.threshold import BrownianThreshold
from kcpstream.features.window import InvariantWindow

__all__ = [
    "FeatureMap",
    "NotFittedError",
    "RFF",
    "ORF",
    "MaternRFF",
    "QuadratureFF",
    "BrownianThreshold",
    "InvariantWindow",
    "Temporal",
    "FourierFeatures",
    "Nystrom",
    "SketchedNystrom",
    "Linear",
    "FEATURE_MAPS",
    "get_feature_map_class",
    "make_feature_map",
    "default_feature_map",
    "register_feature_map",
]

for _cls in (
    RFF,
    ORF,
    MaternRFF,
    QuadratureFF,
    BrownianThreshold,
    InvariantWindow,
    Temporal,
    Nystrom,
    SketchedNystrom,
    Linear,
):
    register_feature_map(_cls)


#: Features of the default map ("auto").
DEFAULT_FEATURES = 64


def default_feature_map(d: int, *, seed: int | None = None) -> FeatureMap:
    """The map ``features="auto"`` stands for, for a signal of ``d`` channels.

    Univariate: Gauss-Hermite quadrature features of the Gaussian kernel (at
    64 features they reproduce the exact kernel to float32 precision, at the
    cost of random Fourier features, with no randomness;
    ``benchmarks/results/feature_results.md``).  Multivariate: random Fourier
    features of the channels standardised each by its own scale, in an order of
    what they hold (``RFF(scaled=True)``): the answer does not depend on the
    channels' units or order.
    """
    if d == 1:
        return QuadratureFF(DEFAULT_FEATURES)
    if seed is None:
        return RFF(DEFAULT_FEATURES, scaled=True)
    return RFF(DEFAULT_FEATURES, seed=seed, scaled=True)


def make_feature_map(
    spec: str | FeatureMap, *, seed: int | None = None, d: int | None = None
) -> FeatureMap:
    """A feature map from an instance, a spec string, or ``"auto"``.

    An instance is returned as it is.  A spec string is ``"name[:p]"`` with
    any of the map's parameters after the ``:`` as comma-separated
    ``key=value`` (``"rff:64"``, ``"quadrature:bandwidth=0.5"``,
    ``"rff:32,kernel=laplacian"``); ``seed`` (when not None) is passed to
    maps that take one, unless the spec gives its own.  ``"auto"`` needs the
    signal's dimension ``d`` (see :func:`default_feature_map`).
    """
    if isinstance(spec, FeatureMap):
        return spec
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        if d is None:
            raise InputError("features='auto' depends on the signal's dimension; pass d=")
        return default_feature_map(d, seed=seed)
    if not isinstance(spec, str):
        raise InputError(
            "features must be a FeatureMap or a spec string like 'rff:64', "
            f"got {type(spec).__name__}"
        )
    name, colon, rest = spec.partition(":")
    cls = get_feature_map_class(name.strip())
    kwargs = _spec_parameters(spec, cls, rest) if colon else {}
    if seed is not None and "seed" in cls._param_names and "seed" not in kwargs:
        kwargs["seed"] = seed
    return cls(**kwargs)


def _spec_parameters(spec: str, cls: type, rest: str) -> dict:
    """The parameters after the ``:`` of a spec: the number of features, and
    ``name=value`` pairs of the map's parameters, comma-separated
    (``"rff:64"``, ``"quadrature:bandwidth=0.5"``, ``"rff:32,bandwidth=2"``)."""
    kwargs: dict = {}
    for item in (part.strip() for part in rest.split(",")):
        if not item:
            raise InputError(
                f"bad feature spec {spec!r}: an empty part; give 'name:p' and key=value "
                "parts separated by single commas (e.g. 'rff:32,bandwidth=2.5')"
            )
        key, equals, value = item.partition("=")
        key = key.strip() if equals else "n_features"
        value = value.strip() if equals else item
        if key not in cls._param_names:
            raise InputError(
                f"bad feature spec {spec!r}: {key!r} is not a parameter of {cls.__name__} "
                f"(its parameters: {', '.join(cls._param_names)})"
            )
        if key in kwargs:
            raise InputError(f"bad feature spec {spec!r}: {key!r} is given twice")
        kwargs[key] = _spec_value(value)
        if key == "n_features" and not isinstance(kwargs[key], int):
            raise InputError(
                f"bad feature spec {spec!r}: the number of features must be an integer "
                "(e.g. 'rff:64')"
            )
    return kwargs


def _spec_value(text: str) -> int | float | bool | str | None:
    """A spec's value as the number, truth value or None it spells, else as the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.lower() == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text

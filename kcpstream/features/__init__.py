"""Feature maps: low-rank approximations of a kernel, and the registry.

A map is chosen by instance (``RFF(n_features=128, seed=1)``) or by a short
spec string ``"name"`` or ``"name:p"`` (``"rff:64"``, ``"orf:64"``,
``"matern:64"``, ``"quadrature:32"``, ``"nystrom:32"``, ``"linear"``) through
:func:`make_feature_map`.
"""

from __future__ import annotations

from .base import FeatureMap, NotFittedError
from .linear import Linear
from .matern import MaternRFF
from .nystrom import Nystrom
from .orthogonal import ORF
from .quadrature import QuadratureFF
from .rff import RFF, FourierFeatures
from .sketched import SketchedNystrom
from .threshold import BrownianThreshold
from .window import InvariantWindow

__all__ = [
    "FeatureMap",
    "NotFittedError",
    "RFF",
    "ORF",
    "MaternRFF",
    "QuadratureFF",
    "BrownianThreshold",
    "InvariantWindow",
    "FourierFeatures",
    "Nystrom",
    "SketchedNystrom",
    "Linear",
    "FEATURE_MAPS",
    "get_feature_map_class",
    "make_feature_map",
    "register_feature_map",
]

FEATURE_MAPS: dict[str, type[FeatureMap]] = {}


def register_feature_map(cls: type[FeatureMap]) -> type[FeatureMap]:
    """Register a :class:`FeatureMap` subclass under ``cls.name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no registry name")
    FEATURE_MAPS[cls.name] = cls
    return cls


for _cls in (
    RFF,
    ORF,
    MaternRFF,
    QuadratureFF,
    BrownianThreshold,
    InvariantWindow,
    Nystrom,
    SketchedNystrom,
    Linear,
):
    register_feature_map(_cls)


def get_feature_map_class(name: str) -> type[FeatureMap]:
    """The registered class called ``name``."""
    try:
        return FEATURE_MAPS[name.lower()]
    except KeyError:
        known = ", ".join(sorted(FEATURE_MAPS))
        raise ValueError(f"unknown feature map {name!r}; known maps: {known}") from None


def make_feature_map(spec: str | FeatureMap, *, seed: int | None = None) -> FeatureMap:
    """A feature map from an instance or a spec string ``"name[:p]"``.

    An instance is returned as it is.  For a spec string, ``seed`` (when not
    None) is passed to maps that take one.
    """
    if isinstance(spec, FeatureMap):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            "features must be a FeatureMap or a spec string like 'rff:64', "
            f"got {type(spec).__name__}"
        )
    name, _, size = spec.partition(":")
    cls = get_feature_map_class(name.strip())
    kwargs: dict = {}
    if size:
        try:
            kwargs["n_features"] = int(size)
        except ValueError:
            raise ValueError(
                f"bad feature spec {spec!r}: the part after ':' must be an integer"
            ) from None
    if seed is not None and "seed" in cls._param_names:
        kwargs["seed"] = seed
    return cls(**kwargs)

"""The registry of feature maps by name: what spec strings and saved maps refer to.

It imports no feature map: :mod:`kcpstream.features` registers the built-in
ones, and a third-party map registers itself with :func:`register_feature_map`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from .base import FeatureMap

__all__ = ["FEATURE_MAPS", "register_feature_map", "get_feature_map_class"]

FEATURE_MAPS: dict[str, type[FeatureMap]] = {}


def register_feature_map(cls: type[FeatureMap]) -> type[FeatureMap]:
    """Register a :class:`FeatureMap` subclass under ``cls.name`` (usable as a decorator)."""
    if not cls.name:
        raise InputError(f"{cls.__name__} has no registry name")
    FEATURE_MAPS[cls.name] = cls
    return cls


def get_feature_map_class(name: str) -> type[FeatureMap]:
    """The registered class called ``name``."""
    try:
        return FEATURE_MAPS[name.lower()]
    except KeyError:
        known = ", ".join(sorted(FEATURE_MAPS))
        raise InputError(f"unknown feature map {name!r}; known maps: {known}") from None

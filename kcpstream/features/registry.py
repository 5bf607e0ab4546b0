"""The registry of feature maps by name: what spec strings and saved maps refer to.

It imports no feature map: :mod:`kcpstream.features` registers the built-in
ones, and a third-party map registers itself with :func:`register_feature_map`.
"""

from __future__ import annotations

from typing import TypeVar

from kcpstream.errors import InputError

# a FeatureMap subclass: the registry imports no map, not even the base class
# (kcpstream.features.base looks classes up here)
MapClass = TypeVar("MapClass", bound=type)

__all__ = ["FEATURE_MAPS", "register_feature_map", "get_feature_map_class"]

FEATURE_MAPS: dict[str, type] = {}

#: Each registered class's own name, lower-case, where it differs from its
#: registry name (``"quadratureff"`` for ``"quadrature"``): a spec may use either.
ALIASES: dict[str, str] = {}


def register_feature_map(cls: MapClass) -> MapClass:
    """Register a :class:`~kcpstream.features.FeatureMap` subclass under
    ``cls.name`` (usable as a decorator), and under its class name in lower case."""
    if not cls.name:
        raise InputError(f"{cls.__name__} has no registry name")
    FEATURE_MAPS[cls.name] = cls
    if cls.__name__.lower() != cls.name:
        ALIASES[cls.__name__.lower()] = cls.name
    return cls


def get_feature_map_class(name: str) -> type:
    """The registered class called ``name`` (its registry name or its class name,
    in any case)."""
    key = name.lower()
    try:
        return FEATURE_MAPS[ALIASES.get(key, key)]
    except KeyError:
        known = ", ".join(sorted(FEATURE_MAPS))
        raise InputError(f"unknown feature map {name!r}; known maps: {known}") from None

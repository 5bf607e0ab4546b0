"""What every input goes through, wherever it comes from: its dtype, its default chunks."""

from __future__ import annotations

import numpy as np

from kcpstream.errors import InputError


def check_dtype(dtype: np.dtype, description: str) -> None:
    """Raise :class:`InputError` unless ``dtype`` holds real numbers: integers,
    floating-point numbers, or booleans (a flag, ``da > threshold``), which
    every stage reads as the integers 0 and 1 that numpy casts them to."""
    if dtype.kind not in "iufb":
        raise InputError(
            f"{description} has dtype {dtype}, which is not a real number type; "
            "kcpstream segments integer, floating-point or boolean samples"
        )


def default_chunk(n: int) -> int:
    """Chunk length for in-memory arrays: views, a few chunks per core."""
    return int(max(2**16, min(2**20, -(-n // 8))))

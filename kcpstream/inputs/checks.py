"""What every input goes through, wherever it comes from: its dtype, its default chunks."""

from __future__ import annotations

import numpy as np

from kcpstream.errors import InputError


def check_dtype(dtype: np.dtype, description: str) -> None:
    """Raise :class:`InputError` unless ``dtype`` holds real numbers."""
    if dtype.kind not in "iuf":
        hint = " (cast booleans with .astype(float))" if dtype.kind == "b" else ""
        raise InputError(
            f"{description} has dtype {dtype}, which is not a real number type; "
            f"kcpstream segments integer or floating-point samples{hint}"
        )


def default_chunk(n: int) -> int:
    """Chunk length for in-memory arrays: views, a few chunks per core."""
    return int(max(2**16, min(2**20, -(-n // 8))))

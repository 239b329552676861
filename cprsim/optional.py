"""Optional dependencies, imported where used, with a one-line error naming the install."""

from __future__ import annotations

from typing import Any


def require_pandas(what: str = "to_frame()") -> Any:
    """The pandas module, or an ImportError (one line) naming ``pip install pandas``."""
    try:
        import pandas
    except ImportError:
        raise ImportError(
            f"{what} needs pandas, an optional dependency: pip install pandas", name="pandas"
        ) from None
    return pandas

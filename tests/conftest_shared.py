"""Where ../shared is (CPRSIM_SHARED overrides), for the tests that read the public traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(
    os.environ.get("CPRSIM_SHARED", Path(__file__).resolve().parents[1].parent / "shared")
)
PUBLIC = SHARED / "traces" / "public"

needs_shared = pytest.mark.skipif(
    not PUBLIC.is_dir(),
    reason=f"the public traces are not at {PUBLIC} (set CPRSIM_SHARED to the shared/ folder to run these)",
)

"""The installed cprsim version (``cprsim.__version__``), for modules below the package's facade."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cprsim")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

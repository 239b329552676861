"""cprsim: simulator and planner for fault-tolerant training of recommendation models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cprsim")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

"""The access-skew figure of ``cprsim access --plot``: coverage of the top rows, and rows touched."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from cprsim.access import AccessModel

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure


def plot_access(model: AccessModel, samples: Sequence[float]) -> Figure:
    """Left: the coverage c(r) of the top fraction r of rows (log axis), exact and ranked from every
    other sample count of ``samples`` (numbers of training samples); right: the fraction of rows
    touched after n samples, n from 1e2 to 1e9 (log-log). Returns a new Figure (10 x 4 inches, made
    without pyplot; :func:`cprsim.plots.save_figure` writes it)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    a1, a2 = fig.subplots(1, 2)
    r = np.geomspace(1e-5, 1, 200)
    a1.semilogx(r, model.coverage(r), label="exact ranking")
    for n in list(samples)[::2]:
        a1.semilogx(
            r[::10],
            [model.sampled_coverage(x, n) for x in r[::10]],
            "--",
            label=f"ranked from {n:.0e} samples",
        )
    a1.set_xlabel("top fraction of rows r")
    a1.set_ylabel("share of accesses c(r)")
    a1.legend(fontsize=8)
    a1.set_title(f"coverage (Zipf alpha={model.alpha:.3f})")
    nn = np.geomspace(1e2, 1e9, 40)
    a2.loglog(nn, model.touched(nn))
    a2.set_xlabel("samples")
    a2.set_ylabel("fraction of rows touched")
    a2.set_title("rows touched after n samples")
    fig.tight_layout()
    return fig

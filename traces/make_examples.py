"""Generate the small example traces in traces/examples/ (cprsim's own data, not a public log).

Each example is a cluster of nodes observed over a window, failing as a renewal process with a
known distribution and repaired after a known time, written in cprsim's trace schema. Because the
truth is known, they double as fitting examples: `cprsim fit traces/examples/weibull-64.csv` should
find the parameters below inside its 95% intervals.

Usage: python traces/make_examples.py   (rewrites traces/examples/*.csv; same bytes every time)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cprsim.failures.distributions import Distribution
from cprsim.failures.traces import NodeHistory, Trace, write_csv
from cprsim.io import atomic_write_text

EXAMPLES = {
    # name: (nodes, window h, lifetime (hours), repair (hours), node type, seed)
    "weibull-64": (64, 8_760.0, Distribution("weibull", 2_000.0, 0.7), Distribution("lognormal", 2.0, 1.0), "node", 1),
    "exponential-16": (16, 2_000.0, Distribution("exponential", 500.0), Distribution("exponential", 0.5), "embedding", 2),
}


def generate(nodes: int, window: float, life: Distribution, repair: Distribution, node_type: str, seed: int) -> Trace:
    rng = np.random.default_rng(seed)
    hist = {}
    for i in range(nodes):
        h = NodeHistory(f"n{i:03d}", node_type, 0.0, window)
        t = 0.0
        while True:
            t += float(life.sample(rng))
            if t >= window:
                break
            h.events.append((round(t, 6), "fail", "synthetic"))
            t += float(repair.sample(rng))
            if t >= window:
                break
            h.events.append((round(t, 6), "repair", ""))
        hist[h.node] = h
    return Trace(hist, "synthetic")


def main() -> None:
    out = Path(__file__).with_name("examples")
    for name, args in EXAMPLES.items():
        atomic_write_text(out / f"{name}.csv", write_csv(generate(*args)))
        print(f"wrote {out / name}.csv")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Regenerate the strategy comparison (table + figures), the 1,024-server interval sweep and the
# comparison with ECRec's published figures into out/. Extra arguments go to compare.py; JOBS
# (default 2) processes plan the settings and run the sweep. Wall time: README.md.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../../.venv/bin/python}"
CPRSIM=("$PY" -m cprsim)
"$PY" compare.py --jobs "${JOBS:-2}" "$@"
rm -rf out/sweep
"${CPRSIM[@]}" sweep sweep.toml --out out/sweep --jobs "${JOBS:-2}"
"${CPRSIM[@]}" plot overhead out/sweep --out out/sweep_overhead_vs_interval.png
"${CPRSIM[@]}" plot pls out/sweep --out out/sweep_pls_vs_interval.png
"${CPRSIM[@]}" plot breakdown out/sweep --where checkpoint.interval_h=1.2 --out out/sweep_breakdown_1.2h.png
"$PY" ecrec.py

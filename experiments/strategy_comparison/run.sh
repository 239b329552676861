#!/usr/bin/env bash
# Regenerate the strategy comparison (table + figures) into out/ (several minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../../.venv/bin/python}"
"$PY" compare.py "$@"

#!/usr/bin/env bash
# Regenerate the CPR headline table and figure into out/ (about a minute on 2 cores).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../../.venv/bin/python}"
"$PY" reproduce.py "$@"

# Sourced by every experiments/*/run.sh (before anything else): the settings they share.
#
#   PYTHON  the interpreter with cprsim installed (default: the repository's .venv)
#   JOBS    worker processes for sweeps and scripts (default 2)
#   QUICK   1: the same pipeline (every script, every cprsim command, every plot) on tiny sizes,
#           a smoke test of a few seconds a step; the numbers mean nothing and the README is left
#           alone. Unset or 0: the full run, which reproduces the published figures and splices
#           its tables into the experiment's README (experiments/update_readmes.py).
#   OUT     where the outputs go (default: out/ in the experiment's folder; a relative path is
#           taken from the directory run.sh was called from)
#
# After sourcing: the shell is in the experiment's folder; PY, CPRSIM (an array), JOBS, OUT
# (absolute) and QUICK (0 or 1) are set; `quick` tests for quick mode; `quick_sweep` gives the
# sweep file to run; `finish` ends the run (run.md, and the README splice in full mode).
set -euo pipefail

EXPERIMENT_DIR="$(cd "$(dirname "$0")" && pwd)"
EXPERIMENT="$(basename "$EXPERIMENT_DIR")"
EXPERIMENTS="$(dirname "$EXPERIMENT_DIR")"
case "${QUICK:-0}" in
  "" | 0) QUICK=0 ;;
  *) QUICK=1 ;;
esac
# paths given relative to the caller's directory (no symlink resolution: a venv's python stays one)
if [ -n "${OUT:-}" ]; then OUT="$(realpath -ms -- "$OUT")"; else OUT="$EXPERIMENT_DIR/out"; fi
if [ -n "${PYTHON:-}" ]; then
  case "$PYTHON" in */*) PYTHON="$(realpath -ms -- "$PYTHON")" ;; esac
fi
cd "$EXPERIMENT_DIR"
PY="${PYTHON:-../../.venv/bin/python}"
CPRSIM=("$PY" -m cprsim)
JOBS="${JOBS:-2}"
export PYTHONHASHSEED=0 MPLBACKEND=Agg
mkdir -p "$OUT"
_T0=$(date +%s)
_STARTED="$(date -u '+%Y-%m-%d %H:%M') UTC"
_LOAD0="$(cut -d' ' -f1-3 /proc/loadavg)"
_ARGS="$*"  # run.sh's own arguments (this file is sourced without any)
echo "== experiments/$EXPERIMENT: $([ "$QUICK" = 1 ] && echo quick || echo full) run into $OUT ($JOBS jobs)"

quick() { [ "$QUICK" = 1 ]; }

# quick_sweep SWEEP.toml [KEY=V1,V2 ...] [replications=N]: in full mode, SWEEP.toml itself; in
# quick mode, a copy in $OUT/quick/ with those grid values and replications (quick_sweep.py).
# Scenario paths in the copy are made absolute; SCENARIO_DIR, if set, replaces their folder.
quick_sweep() {
  local src="$1"
  shift
  if quick; then
    local dest="$OUT/quick/$(basename "$src")"
    "$PY" "$EXPERIMENTS/quick_sweep.py" "$src" "$dest" ${SCENARIO_DIR:+--scenario-dir "$SCENARIO_DIR"} "$@" >&2
    echo "$dest"
  else
    echo "$src"
  fi
}

# finish: write $OUT/run.md (what ran, when, on what, how long); in full mode into the default out/,
# splice the generated tables into the README (between its `<!-- begin generated: ... -->` markers).
finish() {
  local t1 rev mode="" text
  t1=$(date +%s)
  rev="$(git -C "$EXPERIMENT_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [ -n "$(git -C "$EXPERIMENT_DIR" status --porcelain 2>/dev/null | head -1)" ]; then
    rev="$rev with uncommitted changes"
  fi
  quick && mode="QUICK=1 "
  text="Produced by \`${mode}JOBS=$JOBS experiments/$EXPERIMENT/run.sh${_ARGS:+ $_ARGS}\` on $_STARTED"
  text="$text (commit $rev): **$((t1 - _T0)) s** wall time on $(nproc) cores, load average"
  text="$text $_LOAD0 at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end; Python"
  text="$text $("$PY" -c 'import platform; print(platform.python_version())'), cprsim"
  text="$text $("$PY" -c 'import cprsim; print(cprsim.__version__)')."
  quick && text="$text (Quick mode: tiny sizes, the numbers mean nothing.)"
  "$PY" -c 'import os, sys; p = sys.argv[1]; open(p + ".tmp", "w").write(sys.argv[2] + "\n"); os.replace(p + ".tmp", p)' \
    "$OUT/run.md" "$text"
  echo "== experiments/$EXPERIMENT: done in $((t1 - _T0)) s"
  if quick; then
    echo "(QUICK=1: README.md left as it is)"
  elif [ "$OUT" != "$EXPERIMENT_DIR/out" ]; then
    echo "(OUT is not out/: README.md left as it is; splice with"
    echo " $PY $EXPERIMENTS/update_readmes.py --out-dir $OUT $EXPERIMENT_DIR/README.md)"
  else
    "$PY" "$EXPERIMENTS/update_readmes.py" README.md
  fi
}

#!/usr/bin/env bash
# Regenerate every table and figure of README.md into out/ (wall time: README.md, "Measured").
# JOBS=N worker processes (default 2). Needs the repository's venv (or PYTHON=...).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../../.venv/bin/python}"
CPRSIM=("$PY" -m cprsim)
JOBS="${JOBS:-2}"
t0=$(date +%s)
echo "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC; load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" | tee out.log.tmp
"$PY" make_scenarios.py
rm -rf out && mkdir out && mv out.log.tmp out/run.log
# 1. dlrm-spares: pools, escalation, detection x interval, bad machines (cprsim sweep)
for s in pools escalation detection health; do
  "${CPRSIM[@]}" sweep "$s.toml" --out "out/$s" --jobs "$JOBS"
done
#    retirement on: points a sweep cannot run (the fleet runs out of machines in some replication)
"$PY" feasibility.py --jobs "$JOBS"
#    the built-in scenario as is, with its badput table (summary.json)
"${CPRSIM[@]}" simulate dlrm-spares --out out/simulate-dlrm-spares > out/simulate-dlrm-spares.txt
# 2. llm-16k-gpus: blocking vs tiered, persist period x peer stride, standbys; the planner
for s in llm-blocking llm-tiered llm-standbys; do
  "${CPRSIM[@]}" sweep "$s.toml" --out "out/$s" --jobs "$JOBS"
done
"${CPRSIM[@]}" simulate llm-16k-gpus -n 30 --interval 0.04h --out out/simulate-llm-16k-gpus > out/simulate-llm-16k-gpus.txt
COLUMNS=200 "${CPRSIM[@]}" plan llm-16k-gpus --max-accuracy-loss 0.001 -n 40 --search-replications 40 \
  --confidence mean --out out/plan-llm-16k-gpus.json > out/plan-llm-16k-gpus.txt
rm -f out/simulate-*/events.csv  # per-event logs: large, not used
# 3. figures: cprsim plot where it fits, analyze.py for the rest and the tables
"${CPRSIM[@]}" plot breakdown out/detection --where checkpoint.interval_h=0.7 --out out/breakdown_detection_0.7h.png
"${CPRSIM[@]}" plot overhead out/detection --where lifecycle.detection.mean_s=1800.0 --band p90 \
  --out out/overhead_detection_30min.png
"${CPRSIM[@]}" plot breakdown out/llm-tiered --where checkpoint.tiers.peer_stride=1 --where checkpoint.interval_h=0.04 \
  --out out/breakdown_llm_tiered_0.04h.png
"$PY" analyze.py
gzip -9n out/*/results.csv  # keep out/ small; analyze.py reads either
t1=$(date +%s)
echo "end $(date -u '+%Y-%m-%d %H:%M:%S') UTC; load average: $(cut -d' ' -f1-3 /proc/loadavg); elapsed $((t1 - t0)) s" | tee -a out/run.log

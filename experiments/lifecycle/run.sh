#!/usr/bin/env bash
# Regenerate every table and figure of README.md into out/ and splice the tables into README.md
# (wall time: README.md, "Measured"). JOBS=N worker processes (default 2); QUICK=1: the same steps
# on tiny sizes (seconds; README and scenarios/ untouched); OUT=DIR: outputs there. Needs the
# repository's venv (or PYTHON=...). See ../common.sh.
. "$(dirname "$0")/../common.sh"
echo "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC; load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" \
  > "$OUT/run.log.tmp"
# the sweeps' outputs (not the folder: OUT may be anything)
rm -rf "$OUT"/{pools,escalation,detection,health,cures,feasibility,llm-blocking,llm-tiered,llm-standbys} \
  "$OUT"/simulate-* "$OUT"/plan-llm-16k-gpus.* "$OUT/tables" "$OUT/tables.md" "$OUT/quick"
mv "$OUT/run.log.tmp" "$OUT/run.log"
if quick; then
  SCENARIO_DIR="$OUT/scenarios"  # quick_sweep points the sweeps' scenario paths here
  "$PY" make_scenarios.py --out "$SCENARIO_DIR"
  R=2 RL=2  # replications a point: dlrm-spares, llm-16k-gpus
  # llm-16k-gpus shrunk to 128 nodes and 48 h (its planner: 56 s -> 5 s)
  LLM_SET=(set.cluster.trainers=128 set.job.duration_h=48)
  LLM_CLI=(--set cluster.trainers=128 --set job.duration_h=48)
else
  "$PY" make_scenarios.py
fi
# 1. dlrm-spares: pools, escalation, detection x interval, bad machines (cprsim sweep)
for s in pools escalation detection health cures; do
  "${CPRSIM[@]}" sweep "$(quick_sweep "$s.toml" replications="${R:-}")" --out "$OUT/$s" --jobs "$JOBS"
done
#    retirement on: points a sweep cannot run (the fleet runs out of machines in some replication)
"$PY" feasibility.py --jobs "$JOBS" --out "$OUT" ${R:+--replications "$R"}
#    the built-in scenario as is, with its badput table (summary.json)
"${CPRSIM[@]}" simulate dlrm-spares ${R:+-n "$R"} --out "$OUT/simulate-dlrm-spares" > "$OUT/simulate-dlrm-spares.txt"
# 2. llm-16k-gpus: blocking vs tiered, persist period x peer stride, standbys; the planner
for s in llm-blocking llm-tiered llm-standbys; do
  "${CPRSIM[@]}" sweep "$(quick_sweep "$s.toml" replications="${RL:-}" ${LLM_SET[@]+"${LLM_SET[@]}"})" \
    --out "$OUT/$s" --jobs "$JOBS"
done
"${CPRSIM[@]}" simulate llm-16k-gpus -n "${RL:-30}" ${LLM_CLI[@]+"${LLM_CLI[@]}"} --interval 0.04h \
  --out "$OUT/simulate-llm-16k-gpus" \
  > "$OUT/simulate-llm-16k-gpus.txt"
COLUMNS=200 "${CPRSIM[@]}" plan llm-16k-gpus --max-accuracy-loss 0.001 -n "${RL:-40}" --search-replications "${RL:-40}" \
  --confidence mean ${LLM_CLI[@]+"${LLM_CLI[@]}"} --out "$OUT/plan-llm-16k-gpus.json" > "$OUT/plan-llm-16k-gpus.txt"
rm -f "$OUT"/simulate-*/events.csv  # per-event logs: large, not used
# 3. figures: cprsim plot where it fits, analyze.py for the rest and the tables
"${CPRSIM[@]}" plot breakdown "$OUT/detection" --where checkpoint.interval_h=0.7 --out "$OUT/breakdown_detection_0.7h.png"
"${CPRSIM[@]}" plot overhead "$OUT/detection" --where lifecycle.detection.mean_s=1800.0 --band p90 \
  --out "$OUT/overhead_detection_30min.png"
"${CPRSIM[@]}" plot breakdown "$OUT/llm-tiered" --where checkpoint.tiers.peer_stride=1 --where checkpoint.interval_h=0.04 \
  --out "$OUT/breakdown_llm_tiered_0.04h.png"
"$PY" analyze.py --out "$OUT"
gzip -9nf "$OUT"/*/results.csv  # keep out/ small; analyze.py reads either
echo "end $(date -u '+%Y-%m-%d %H:%M:%S') UTC; load average: $(cut -d' ' -f1-3 /proc/loadavg); elapsed $(($(date +%s) - _T0)) s" \
  >> "$OUT/run.log"
finish

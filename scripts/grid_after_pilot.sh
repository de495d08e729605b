#!/usr/bin/env bash
# Wait for a running pilot (process PID) to finish, land its per-prompt files in
# docs/results/pilots/ (committed) and check its declared decision rule
# (python -m advest.experiments.grid.pilot); only if the rule is met, run the grid DESIGN in this
# same background job, so one job runs at a time: one torch thread, the lowest priority, each
# finished run's file committed as it finishes (finished runs are skipped on a rerun).
#   nohup scripts/grid_after_pilot.sh PID PILOT_RESULTS DESIGN [grid flags...] > LOG 2>&1 &
# PYTHON: the interpreter (default: python). Resume a stopped grid with scripts/grid.sh DESIGN.
set -euo pipefail
pid=${1:?usage: grid_after_pilot.sh PID PILOT_RESULTS DESIGN [grid flags...]}
pilot=${2:?pilot results folder} design=${3:?grid design}
shift 3
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
while kill -0 "$pid" 2>/dev/null; do sleep 60; done
echo "pilot finished $(date -u +%FT%TZ)"
"$py" scripts/grid.py --repo . land "$pilot" --commit
if ! "$py" -m advest.experiments.grid.pilot "$pilot"; then
  echo "the pilot's rule is not met (or it has no finished run): grid ${design} not started"
  exit 1
fi
echo "grid ${design} started $(date -u +%FT%TZ)"
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 exec nice -n 19 \
  "$py" scripts/grid.py --repo . run "$design" "$@"

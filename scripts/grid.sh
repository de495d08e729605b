#!/usr/bin/env bash
# Start or resume the pass/fail grid (`advest experiment grid`) in the background:
# one torch thread at the lowest priority (the machine's other core is someone else's), each
# finished run's per-prompt file committed as it finishes (finished runs are skipped).
#   scripts/grid.sh [DESIGN [grid flags...]]   DESIGN: a key of experiments/grid/__init__.py DESIGNS, each
#   declared in docs/results/designs/DESIGN.toml before its first run (its seeds there: e.g.
#   scripts/grid.sh embedded_rows2000_replication --first_seed 100 --arms grpo maxpo pkpo_sloo
#   chen_passk kae maxpo_k8 pkpo_sloo_k8); the real-model grid: smollm2_products12;
#   e.g. scripts/grid.sh embedded --arms chen_passk kae   (arms beyond the design's three)
# The log goes to /tmp/advest-grid-DESIGN.log (outside the repository); the PID is printed.
set -euo pipefail
design="${1:-smollm2}"
shift $(( $# > 0 ? 1 : 0 ))
cd "$(dirname "$0")/.."
if ! python -c "import torch, advest.training" 2>/dev/null; then
  echo "grid.sh: this python cannot import torch and advest; activate the project's environment" >&2
  exit 1
fi
log="/tmp/advest-grid-${design}.log"
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nohup nice -n 19 \
  python scripts/grid.py --repo . run "$design" "$@" >"$log" 2>&1 &
echo "grid ${design}: PID $!, log ${log}"

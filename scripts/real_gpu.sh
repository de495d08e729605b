#!/usr/bin/env bash
# The full grid of `advest experiment real` (2 tasks × 14 arms × 3 seeds, K = 4 with G = 8 and
# K = 8 with G = 16) and `advest experiment values`, on one GPU, sized for about 8 minutes on an
# H200 (an estimate). HF `generate` is bound by Python overhead at this model size, so several
# experiment processes share the GPU, one per (task, seed, half of the arms), beside the values
# benchmark, at most JOBS at a time (default 6). Measured on an H200 (2026-11-26): all 12 at once
# ran out of its 140 GB (each process held 10 to 14.5 GB: a KV cache of up to 4096 held-out
# samples in float32), and no arm finished in 400 s; JOBS=6 keeps the peak near 90 GB.
# If it runs long, lower --steps in GRID: every finished run is kept, and running the script
# again with the same OUT reuses them. The numbers in the README come from the CPU configuration
# (`advest experiment real` defaults).
#
#   bash scripts/real_gpu.sh MODEL OUT [WHEELS]
#
# MODEL: SmolLM2-135M-Instruct as a .gguf file or a save_pretrained folder. OUT: the results
# folder (OUT/real: metrics.json, summary.json, passk.csv, summary.md, passk.png; OUT/values:
# metrics.json, summary.md; logs beside them). WHEELS: optional folder of wheels to install
# offline first (reasoning-gym and its dependencies, gguf for a .gguf MODEL).
# Then, on a machine with the repository: python scripts/choosing.py --repo .
#   --values OUT/values   (rewrites docs/choosing.md and the README blocks).
set -euo pipefail
MODEL=${1:?usage: real_gpu.sh MODEL OUT [WHEELS]}
OUT=${2:?usage: real_gpu.sh MODEL OUT [WHEELS]}
WHEELS=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ -n "$WHEELS" ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
mkdir -p "$OUT/parts"
ADVEST="python3 -m advest.cli"
# a GGUF file becomes a plain folder once, here, not in 13 processes at the same time
MODEL=$(python3 -c 'import sys; from advest.training import models; print(models.folder(sys.argv[1]))' "$MODEL")
GRID=(--model "$MODEL" --steps 40 --prompts 8 --tokens 32 --eval_prompts 64 --samples 64)
HALF1=(grpo maxpo pkpo_sloo rloo chen_passk maxrl dr_grpo)
HALF2=(numca hista ktae kae covariance_weights maxpo_k8 pkpo_sloo_k8)
start=$(date +%s)
pids=()
for task in chain_sum products; do
  for seed in 0 1 2; do
    for half in 1 2; do
      while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-6}" ]; do sleep 2; done
      name="$task-s$seed-h$half"
      if [ "$half" = 1 ]; then arms=("${HALF1[@]}"); else arms=("${HALF2[@]}"); fi
      $ADVEST experiment real "${GRID[@]}" --tasks "$task" --arms "${arms[@]}" \
        --seeds 1 --first_seed "$seed" --out "$OUT/parts/$name" > "$OUT/parts/$name.log" 2>&1 &
      pids+=($!)
    done
  done
done
$ADVEST experiment values --model "$MODEL" --data reasoning_gym:chain_sum \
  --data_options '{"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}' \
  --data_size 100 --reward reasoning_gym --max_new_tokens 32 --problems 32 --group 16 \
  --states 6 --mc 48 --iterations 6 --hista_w 4 --out "$OUT/values" > "$OUT/values.log" 2>&1 &
pids+=($!)
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
echo "grid done in $(( $(date +%s) - start )) s; $failed process(es) failed (see $OUT/parts/*.log)"
python3 -m advest.experiments.real.report "$OUT/real" "$OUT"/parts/*/

#!/bin/sh
# DCGM job mapping: forget the job on the GPUs it held, and only there: a file another job has
# written since stays. Never fails (a failed epilog drains the node).
dir="__JOB_MAPPING_DIR__"
[ -n "${SLURM_JOB_GPUS:-}" ] && [ -d "$dir" ] || exit 0
for gpu in $(echo "$SLURM_JOB_GPUS" | tr ',' ' '); do
  if [ "$(cat "$dir/$gpu" 2>/dev/null)" = "${SLURM_JOB_ID:-0}" ]; then
    rm -f "$dir/$gpu"
  fi
done
exit 0

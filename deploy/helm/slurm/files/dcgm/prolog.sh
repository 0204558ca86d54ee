#!/bin/sh
# DCGM job mapping: dcgm-exporter labels a GPU's metrics with the job whose id is in
# <dir>/<GPU index>. A prolog that fails drains the node, so nothing here fails the job.
dir="__JOB_MAPPING_DIR__"
[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0
mkdir -p "$dir" 2>/dev/null || { echo "dcgm prolog: cannot make $dir" >&2; exit 0; }
for gpu in $(echo "$SLURM_JOB_GPUS" | tr ',' ' '); do
  printf '%s' "${SLURM_JOB_ID:-0}" >"$dir/$gpu" 2>/dev/null || echo "dcgm prolog: cannot write $dir/$gpu" >&2
done
exit 0

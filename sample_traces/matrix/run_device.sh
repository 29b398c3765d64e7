#!/usr/bin/env bash
# Record the matrix on the GPU of this machine and pack it into ONE tar.gz under $OUT.
#
#   bash sample_traces/matrix/run_device.sh          # from the repository root, on the GPU machine
#
# (designed for the `run` tool: finishes in ~6-7 min; the recorder skips what is left after
# TI_DEADLINE seconds and `timeout` interrupts it after TI_TIMEOUT seconds, so the tar is always made)
# Unpack on the workstation with:  tar xzf matrix_<gpu>.tar.gz -C sample_traces/matrix/
set -u
export PYTHONUNBUFFERED=1
PY=$(command -v python || command -v python3)
OUT=${OUT:-/tmp/matrix_files}
WORK=${TI_WORK:-/tmp/ti_matrix}
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
timeout -s INT -k 15 "${TI_TIMEOUT:-500}" "$PY" sample_traces/matrix/record_matrix.py --out "$WORK" \
    --deadline "${TI_DEADLINE:-400}" "$@" 2>&1 | tee "$OUT/log.txt"
label=$(ls "$WORK" | head -1)
cp "$OUT/log.txt" "$WORK/$label/record_log.txt"
mv "$OUT/log.txt" "$OUT/log_${label}.txt"
f="$OUT/matrix_${label}.tar.gz"
tar czf "$f" -C "$WORK" "$label"
if [ "$(stat -c%s "$f")" -gt 15500000 ]; then          # files coming back are limited to 16 MiB each
    split -b 15000000 -d "$f" "$f.part"; rm "$f"
fi
ls -la "$OUT"; du -sh "$WORK"/*

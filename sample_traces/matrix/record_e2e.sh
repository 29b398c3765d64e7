#!/usr/bin/env bash
# The record path end to end, on the GPU machine, from the repository root:
#
#   bash sample_traces/matrix/record_e2e.sh LABEL WORKLOAD...
#
# 1. record_matrix.py times every variant of the workloads un-profiled (the truth, as for the matrix) and
#    profiles them as usual (LABEL/*.json.gz, LABEL/manifest.json);
# 2. `traceinsight record` runs each workload's before variant as a script (drive.py), with default options and
#    with --with-stack --record-shapes: its own profiler window, then 60 steps timed with the profiler stopped
#    (LABEL/record/WORKLOAD__default|stack/drive.pt.trace.json.gz, the un-profiled step in the trace).
# Everything goes into one tar.gz under $OUT. score_e2e.py reads it here.
set -u
export PYTHONUNBUFFERED=1
label=$1; shift
PY=$(command -v python || command -v python3)
OUT=${OUT:-/tmp/e2e_files}
WORK=${TI_WORK:-/tmp/ti_e2e}
rm -rf "$WORK"; mkdir -p "$WORK/$label/record" "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s INT -k 15 "${TI_TIMEOUT:-240}" "$PY" sample_traces/matrix/record_matrix.py --out "$WORK" --label "$label" \
    --deadline "${TI_DEADLINE:-200}" --only "$@" > "$OUT/matrix_log_$label.txt" 2>&1
grep -E "=====|un-profiled" "$OUT/matrix_log_$label.txt"
for wl in "$@"; do
    # Past the workload's own warm-up (compilation, cuDNN's autotuning) before the window.
    skip=$("$PY" -c "import sys; sys.path.insert(0, 'sample_traces'); import importlib
m = importlib.import_module('matrix.workloads.$wl'); print(max(10, getattr(m, 'WARMUP_STEPS', 5) + 5))")
    for setting in default stack; do
        extra=""
        [ "$setting" = stack ] && extra="--with-stack --record-shapes"
        # shellcheck disable=SC2086
        timeout 150 "$PY" -m traceinsight record --no-analyze -o "$WORK/$label/record/${wl}__$setting" \
            --skip "$skip" --steps 5 --unprofiled-steps 60 $extra \
            sample_traces/matrix/drive.py "$wl" before --steps $((skip + 90)) 2>&1 | tail -2
    done
done
cp "$OUT/matrix_log_$label.txt" "$WORK/$label/record_log.txt"
tar czf "$OUT/e2e_$label.tar.gz" -C "$WORK" "$label"
ls -la "$OUT"

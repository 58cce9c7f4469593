#!/usr/bin/env bash
#===- test/GPU/run_on_h200.sh - the GPU correctness run ------------------===#
#
# Run on the GPU machine from the repository root, with gpu-artifacts/
# (test/GPU/build_artifacts.sh) carried along:
#
#   bash test/GPU/run_on_h200.sh
#
# 1. python3 run_gpu_checks.py                    (full run)
# 2. compute-sanitizer --tool memcheck --error-exitcode 1 \
#        python3 run_gpu_checks.py --small        (with torch's caching
#        allocator off, so that an out-of-bounds access inside a torch
#        allocation cannot hide in a larger cached block)
#
# 3. python3 pyflow/python_flow_check.py          (when gpu-artifacts/pyflow
#        exists: model presets built with the moe_mlir package, called
#        through moe_mlir_runtime, incl. CUDA-graph capture + replay)
#
# 5. python3 lowprec/lowprec_check.py            (when gpu-artifacts/lowprec
#        exists: FP8 block / MXFP4 layers; then its small cases under
#        memcheck; SKIP_LOWPREC=1 leaves it out, LOWPREC_BUDGET /
#        LOWPREC_ARGS as for the Python flow)
#
# 4. python3 hfparity/hf_parity_check.py         (when gpu-artifacts/hfparity
#        exists: the presets at small sizes against the Hugging Face
#        transformers blocks, bf16 and f32)
#
# Everything lands in $OUT (default ./gpu-results): full/ and small/
# (results.json, results.md, summary.txt of each run), full.log, small.log,
# sanitizer-errors.txt, nvidia-smi.txt, pyflow/ and pyflow.log, SUMMARY.md
# with every exit code.
#
# Both runs are bounded so that the whole script fits in one 10-minute
# device command: FULL_BUDGET / SMALL_BUDGET (seconds after which remaining
# checks are SKIPped, default 300 / 150) and hard timeouts 60 s above them.
# FULL_ARGS / SMALL_ARGS add arguments (e.g. FULL_ARGS="--only ffn/"),
# SKIP_FULL=1 / SKIP_SANITIZER=1 / SKIP_PYFLOW=1 / SKIP_HF=1 leave a run out;
# SAN_TOOL picks the compute-sanitizer tool of run 2 (memcheck, the
# default; racecheck: shared-memory hazards; initcheck: reads of global
# memory never written; synccheck: barrier misuse);
# HF_ARGS adds hf_parity_check.py arguments (e.g. HF_ARGS="--T 1,300");
# PYFLOW_BUDGET (default 180) bounds the Python-flow run, PYFLOW_ARGS adds
# arguments (e.g. PYFLOW_ARGS="--presets mixtral-8x7b --T 1,64").
#
# Exit status: 0 when every run passed (and the sanitizer found nothing),
# 2 when nothing failed but the time budget left checks out, 1 otherwise.
#
#===----------------------------------------------------------------------===#
set -uo pipefail

ROOT="$(pwd)"
ART="${ART:-$ROOT/gpu-artifacts}"
if [ ! -f "$ART/run_gpu_checks.py" ]; then
  # also works when started from inside the artifacts folder
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  if [ -f "$here/run_gpu_checks.py" ] && ls "$here"/*.so > /dev/null 2>&1; then
    ART="$here"
  else
    echo "run_on_h200: no $ART/run_gpu_checks.py; build it with" \
         "'bash test/GPU/build_artifacts.sh' and carry gpu-artifacts" >&2
    exit 2
  fi
fi
RES="${OUT:-$ROOT/gpu-results}"
mkdir -p "$RES/full" "$RES/small"
FULL_BUDGET="${FULL_BUDGET:-300}"
SMALL_BUDGET="${SMALL_BUDGET:-150}"
read -r -a FULL_EXTRA <<< "${FULL_ARGS:-}"
read -r -a SMALL_EXTRA <<< "${SMALL_ARGS:-}"
PY="${PYTHON:-python3}"
SAN_TOOL="${SAN_TOOL:-memcheck}"
case "$SAN_TOOL" in
  memcheck|racecheck|initcheck|synccheck) ;;
  *) echo "run_on_h200: SAN_TOOL must be memcheck, racecheck, initcheck or synccheck (got '$SAN_TOOL')" >&2
     exit 2 ;;
esac

echo "=== artifacts: $ART (commit $(cat "$ART/COMMIT" 2>/dev/null || echo unknown))"
echo "=== results:   $RES"
nvidia-smi > "$RES/nvidia-smi.txt" 2>&1 || true
head -n 15 "$RES/nvidia-smi.txt"
"$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))' \
  2>&1 | tee "$RES/env.txt"
ls -l "$ART"/*.so 2>&1 | tee "$RES/artifacts.txt"
cp "$ART/BUILD.txt" "$RES/" 2>/dev/null || true

cd "$ART" || exit 2

full_rc=skipped
if [ "${SKIP_FULL:-0}" != 1 ]; then
  echo
  echo "=== full run (budget ${FULL_BUDGET}s)"
  t0=$SECONDS
  timeout -k 15 $(( FULL_BUDGET + 60 )) \
    "$PY" -u run_gpu_checks.py --out "$RES/full" --budget "$FULL_BUDGET" "${FULL_EXTRA[@]}" \
    > "$RES/full.log" 2>&1
  full_rc=$?
  echo "=== full run: exit $full_rc after $(( SECONDS - t0 ))s; $(grep -c '^FAIL' "$RES/full.log") FAIL lines (log: full.log)"
  [ "$full_rc" = 124 ] && echo "=== full run TIMED OUT (results so far are in $RES/full)"
fi

pyflow_rc=skipped
if [ "${SKIP_PYFLOW:-0}" != 1 ]; then
  echo
  if [ -f pyflow/python_flow_check.py ]; then   # (cwd is $ART)
    PYFLOW_BUDGET="${PYFLOW_BUDGET:-180}"
    read -r -a PYFLOW_EXTRA <<< "${PYFLOW_ARGS:-}"
    echo "=== Python flow (budget ${PYFLOW_BUDGET}s): $(cat pyflow/BUILD.txt 2>/dev/null | grep -E '^(presets|compiled_with):' | tr -s ' ' | paste -sd ';' -)"
    t0=$SECONDS
    timeout -k 15 $(( PYFLOW_BUDGET + 60 )) \
      "$PY" -u pyflow/python_flow_check.py --dir pyflow --out "$RES/pyflow" \
      --budget "$PYFLOW_BUDGET" "${PYFLOW_EXTRA[@]}" > "$RES/pyflow.log" 2>&1
    pyflow_rc=$?
    echo "=== Python flow: exit $pyflow_rc after $(( SECONDS - t0 ))s; $(grep -c '^FAIL' "$RES/pyflow.log") FAIL lines (log: pyflow.log)"
    [ "$pyflow_rc" = 124 ] && echo "=== Python flow TIMED OUT (results so far are in $RES/pyflow)"
  else
    echo "=== Python flow: no $ART/pyflow (built by build_artifacts.sh when the moe_mlir package is importable)"
    pyflow_rc=missing
  fi
fi

hf_rc=skipped
if [ "${SKIP_HF:-0}" != 1 ]; then
  echo
  if [ -f hfparity/hf_parity_check.py ]; then   # (cwd is $ART)
    read -r -a HF_EXTRA <<< "${HF_ARGS:-}"
    echo "=== Hugging Face parity"
    t0=$SECONDS
    timeout -k 15 300 "$PY" -u hfparity/hf_parity_check.py --dir hfparity --out "$RES/hfparity" \
      "${HF_EXTRA[@]}" > "$RES/hfparity.log" 2>&1
    hf_rc=$?
    echo "=== Hugging Face parity: exit $hf_rc after $(( SECONDS - t0 ))s; $(grep -c '^FAIL' "$RES/hfparity.log") FAIL lines (log: hfparity.log)"
  else
    echo "=== Hugging Face parity: no $ART/hfparity (built by build_artifacts.sh)"
    hf_rc=missing
  fi
fi

# 5. The low-precision check (FP8 block / MXFP4 layers against the float64
#    reference of their format; model sizes on a sample of rows), then its
#    small cases under compute-sanitizer memcheck.
lowprec_rc=skipped
lowprec_san_rc=skipped
if [ "${SKIP_LOWPREC:-0}" != 1 ]; then
  echo
  if [ -f lowprec/lowprec_check.py ]; then   # (cwd is $ART)
    LOWPREC_BUDGET="${LOWPREC_BUDGET:-240}"
    read -r -a LOWPREC_EXTRA <<< "${LOWPREC_ARGS:-}"
    echo "=== low-precision check (budget ${LOWPREC_BUDGET}s)"
    t0=$SECONDS
    OUT="$RES" timeout -k 15 $(( LOWPREC_BUDGET + 120 )) "$PY" -u lowprec/lowprec_check.py \
      --dir lowprec --budget "$LOWPREC_BUDGET" --time-T "" "${LOWPREC_EXTRA[@]}" \
      > "$RES/lowprec.log" 2>&1
    lowprec_rc=$?
    echo "=== low-precision check: exit $lowprec_rc after $(( SECONDS - t0 ))s; $(grep -c '^FAIL' "$RES/lowprec.log") FAIL lines (log: lowprec.log)"
    SAN_LP="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    if [ "${SKIP_SANITIZER:-0}" != 1 ] && [ -x "$SAN_LP" ]; then
      t0=$SECONDS
      PYTORCH_NO_CUDA_MEMORY_CACHING=1 OUT="$RES/lowprec-memcheck" timeout -k 15 300 \
        "$SAN_LP" --tool memcheck --error-exitcode 1 --print-limit 100 \
        "$PY" -u lowprec/lowprec_check.py --dir lowprec --budget 200 --time-T "" --T 1,7,64 \
        --only ds-small,ds-small-unfused,ds-small-tile128,ds-small-swap,ds-small-cpasync,ds-partial,ds-tail-wide-up,ds-tail-wide-down,ds-small-main,ds31-main,mx-small,mx-tail,mx-concat,mx-swap16x128,mxh-small,mxh-tail,mxh-swap16x128,mxh-main \
        > "$RES/lowprec-memcheck.log" 2>&1
      lowprec_san_rc=$?
      echo "=== low-precision memcheck: exit $lowprec_san_rc after $(( SECONDS - t0 ))s; $(grep -Eo 'ERROR SUMMARY: [0-9]+' "$RES/lowprec-memcheck.log" | tail -n 1)"
    fi
  else
    echo "=== low-precision check: no $ART/lowprec (built by build_artifacts.sh)"
    lowprec_rc=missing
  fi
fi

# 6. The PyTorch-integration check (torch_op under torch.compile and CUDA
#    graphs, the Hugging Face drop-in, decode speed) when gpu-artifacts/
#    torchint exists. SKIP_TORCHINT=1 leaves it out.
torchint_rc=skipped
if [ "${SKIP_TORCHINT:-0}" != 1 ]; then
  echo
  if [ -f torchint/torchint_check.py ]; then   # (cwd is $ART)
    t0=$SECONDS
    OUT="$RES" timeout -k 15 400 "$PY" -u torchint/torchint_check.py --dir torchint \
      > "$RES/torchint.log" 2>&1
    torchint_rc=$?
    echo "=== PyTorch integration: exit $torchint_rc after $(( SECONDS - t0 ))s; $(grep -c '^FAIL' "$RES/torchint.log") FAIL lines (log: torchint.log)"
  else
    echo "=== PyTorch integration: no $ART/torchint (built by build_artifacts.sh where torch is)"
    torchint_rc=missing
  fi
fi

san_rc=skipped
san_errors=unknown
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  SAN="$(command -v compute-sanitizer || true)"
  if [ -z "$SAN" ]; then
    for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
             /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
      if [ -x "$c" ]; then SAN="$c"; break; fi
    done
  fi
  echo
  if [ -z "$SAN" ]; then
    echo "=== compute-sanitizer not found: sanitizer run skipped"
    san_rc=missing
  else
    echo "=== compute-sanitizer $SAN_TOOL, --small (budget ${SMALL_BUDGET}s): $SAN"
    t0=$SECONDS
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 15 $(( SMALL_BUDGET + 60 )) \
      "$SAN" --tool "$SAN_TOOL" --error-exitcode 1 --print-limit 100 \
      "$PY" -u run_gpu_checks.py --small --out "$RES/small" --budget "$SMALL_BUDGET" \
      "${SMALL_EXTRA[@]}" > "$RES/small.log" 2>&1
    san_rc=$?
    echo "=== sanitizer run: exit $san_rc after $(( SECONDS - t0 ))s (log: small.log)"
    [ "$san_rc" = 124 ] && echo "=== sanitizer run TIMED OUT (results so far are in $RES/small)"
    grep -E '^=========' "$RES/small.log" | head -n 400 > "$RES/sanitizer-errors.txt" || true
    san_errors="$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$RES/small.log" | tail -n 1 | grep -Eo '[0-9]+$' || true)"
    [ -n "$san_errors" ] || san_errors=unknown
  fi
fi

# run_gpu_checks: 0 pass, 1 failures, 2 no failure but checks skipped for time
verdict=PASS
for rc in "$full_rc" "$san_rc" "$pyflow_rc" "$hf_rc" "$lowprec_rc" "$lowprec_san_rc" "$torchint_rc"; do
  case "$rc" in
    0|skipped|missing) ;;
    2) [ "$verdict" = PASS ] && verdict=INCOMPLETE ;;
    *) verdict=FAIL ;;
  esac
done
if [ "$san_errors" != unknown ] && [ "$san_errors" != 0 ]; then verdict=FAIL; fi
{
  echo "# moe-mlir GPU run: $verdict"
  echo
  echo "- commit: $(cat "$ART/COMMIT" 2>/dev/null || echo unknown)"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- env: $(cat "$RES/env.txt" 2>/dev/null | tail -n 1)"
  echo "- full run exit code: $full_rc (0 pass, 1 failures, 2 skipped for time, 124 timeout)"
  echo "- sanitizer run exit code: $san_rc ($SAN_TOOL errors: $san_errors)"
  echo "- Python flow exit code: $pyflow_rc (0 pass, 1 failures, 2 skipped for time, 124 timeout)"
  echo "- Hugging Face parity exit code: $hf_rc (0 pass, 1 failures, 124 timeout)"
  echo "- low-precision check exit code: $lowprec_rc, its memcheck: $lowprec_san_rc"
  echo "- PyTorch integration exit code: $torchint_rc"
  echo
  echo "## full run"
  echo
  echo '```'
  cat "$RES/full/summary.txt" 2>/dev/null || echo "(no summary: see full.log)"
  echo '```'
  echo
  echo "## Python flow (moe_mlir presets through moe_mlir_runtime, CUDA graphs)"
  echo
  echo '```'
  if [ "$pyflow_rc" = skipped ] || [ "$pyflow_rc" = missing ]; then
    echo "($pyflow_rc)"
  else
    cat "$RES/pyflow/summary.txt" 2>/dev/null || echo "(no summary: see pyflow.log)"
  fi
  echo '```'
  echo
  echo "## Hugging Face parity (presets at small sizes vs the transformers blocks)"
  echo
  echo '```'
  if [ "$hf_rc" = skipped ] || [ "$hf_rc" = missing ]; then
    echo "($hf_rc)"
  else
    cat "$RES/hfparity/summary.txt" 2>/dev/null || echo "(no summary: see hfparity.log)"
  fi
  echo '```'
  echo
  echo "## Low-precision check (FP8 block / MXFP4)"
  echo
  echo '```'
  if [ "$lowprec_rc" = skipped ] || [ "$lowprec_rc" = missing ]; then
    echo "($lowprec_rc)"
  else
    cat "$RES/lowprec/summary.txt" 2>/dev/null || echo "(no summary: see lowprec.log)"
    grep -E 'ERROR SUMMARY' "$RES/lowprec-memcheck.log" 2>/dev/null | tail -n 1
  fi
  echo '```'
  echo
  echo "## PyTorch integration (torch_op, torch.compile, CUDA graphs, HF drop-in)"
  echo
  echo '```'
  cat "$RES/torchint/summary.txt" 2>/dev/null || echo "($torchint_rc)"
  echo '```'
  echo
  echo "## compute-sanitizer $SAN_TOOL, --small"
  echo
  echo '```'
  cat "$RES/small/summary.txt" 2>/dev/null || echo "(no summary: see small.log)"
  if [ -s "$RES/sanitizer-errors.txt" ]; then
    echo
    echo "sanitizer output (first lines; all of it in sanitizer-errors.txt):"
    head -n 60 "$RES/sanitizer-errors.txt"
  fi
  echo '```'
} > "$RES/SUMMARY.md"

echo
echo "================================================================"
cat "$RES/SUMMARY.md"
case "$verdict" in PASS) exit 0 ;; INCOMPLETE) exit 2 ;; *) exit 1 ;; esac

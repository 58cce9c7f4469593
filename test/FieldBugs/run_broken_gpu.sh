#!/usr/bin/env bash
#===- test/FieldBugs/run_broken_gpu.sh - field bugs caught on the H200 ----===#
#
# On the GPU machine, from the repository root, with the folders that
# test/FieldBugs/build_broken_gpu.py built (carry gpu-artifacts-broken):
#
#   bash test/FieldBugs/run_broken_gpu.sh [BROKEN_DIR] [GOOD_DIR]
#
# For each bug folder, runs the check that names the bug class and prints
# CAUGHT (the check failed or the sanitizer reported) or MISSED:
#   no-barrier-before-placement  compute-sanitizer racecheck over the ffn/
#                                checks (small T: the fused route + dispatch
#                                kernel); also run on GOOD_DIR (default
#                                gpu-artifacts), where it must be clean
#   launch-empty-grid            the op/ checks (T = 0 among their sizes)
#   i32-output-offset            edge/ffn-deepseek_v3-T38000 (T = 38,000)
#   atomic-placement             the route_dispatch checks (slot positions
#                                compared exactly with the stable order)
#   no-uncovered-fill            the grouped_matmul checks (edge offsets
#                                leave rows uncovered; outputs poisoned)
#   scan-one-bucket-per-thread   the many_experts checks (E = 2048)
# Logs in $OUT (default ./broken-results). Exit 1 if any bug was missed or
# the good build's racecheck was not clean.
#
#===----------------------------------------------------------------------===#
set -uo pipefail
BROKEN="${1:-gpu-artifacts-broken}"
GOOD="${2:-gpu-artifacts}"
RES="${OUT:-$PWD/broken-results}"
mkdir -p "$RES"
SAN="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
status=0
# The bug folders hold ops.*.so alone (ONLY=^ops$): leave out the op/ checks
# of cases/backward.mlir, whose names these patterns would also match.
NOT_BWD='(?!(glu_grad|row_dot|combine_grad|route_grad|grouped_matmul_wgrad|ffn_train|ffn_grad)_)'

checks() { # DIR NAME ARGS...
  local dir="$1" name="$2"
  shift 2
  (cd "$dir" && timeout -k 10 240 python3 -u run_gpu_checks.py --out "$RES/$name" "$@") \
    > "$RES/$name.log" 2>&1
}
racecheck() { # DIR NAME ARGS...
  local dir="$1" name="$2"
  shift 2
  (cd "$dir" && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 10 240 "$SAN" --tool racecheck \
     --print-limit 20 python3 -u run_gpu_checks.py --small --out "$RES/$name" "$@") \
    > "$RES/$name.log" 2>&1
  local rc=$?
  local errors
  errors="$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazard' "$RES/$name.log" | tail -n 1 | grep -Eo '[0-9]+' || echo unknown)"
  echo "    racecheck exit $rc, hazards reported: $errors"
  [ "$rc" = 0 ] && [ "$errors" = 0 ]
}
verdict() { # NAME RC(0 = the check passed)
  if [ "$2" = 0 ]; then
    echo "MISSED $1"
    status=1
  else
    echo "CAUGHT $1"
  fi
}

if [ -d "$BROKEN/no-uncovered-fill" ]; then
  echo "=== no-uncovered-fill"
  checks "$BROKEN/no-uncovered-fill" fill --small --only "/${NOT_BWD}grouped_matmul"
  verdict no-uncovered-fill $?
  grep -c '^FAIL' "$RES/fill.log" | sed 's/^/    failing checks: /'
fi
if [ -d "$BROKEN/scan-one-bucket-per-thread" ]; then
  echo "=== scan-one-bucket-per-thread"
  checks "$BROKEN/scan-one-bucket-per-thread" scan --small --only 'many_experts'
  verdict scan-one-bucket-per-thread $?
  grep -c '^FAIL' "$RES/scan.log" | sed 's/^/    failing checks: /'
fi
if [ -d "$BROKEN/no-barrier-before-placement" ]; then
  echo "=== no-barrier-before-placement"
  racecheck "$BROKEN/no-barrier-before-placement" race-broken --only '^ffn/'
  verdict no-barrier-before-placement $?
fi
if [ -d "$BROKEN/atomic-placement" ]; then
  echo "=== atomic-placement"
  checks "$BROKEN/atomic-placement" atomic --small --only 'route_dispatch'
  verdict atomic-placement $?
  grep -c '^FAIL' "$RES/atomic.log" | sed 's/^/    failing checks: /'
fi
if [ -d "$BROKEN/launch-empty-grid" ]; then
  echo "=== launch-empty-grid"
  checks "$BROKEN/launch-empty-grid" empty-grid --small --only "^op/$NOT_BWD"
  verdict launch-empty-grid $?
  grep -c '^FAIL' "$RES/empty-grid.log" | sed 's/^/    failing checks: /'
  grep -E '^FAIL' "$RES/empty-grid.log" | grep -c ' T=0 ' | sed 's/^/    of them at T = 0: /'
fi
if [ -d "$BROKEN/i32-output-offset" ]; then
  echo "=== i32-output-offset"
  checks "$BROKEN/i32-output-offset" i32 --only 'T38000'
  verdict i32-output-offset $?
  grep -E '^(PASS|FAIL)' "$RES/i32.log" | head -n 4
fi
if [ -d "$BROKEN/no-barrier-before-placement" ]; then
  echo "=== the same racecheck on $GOOD (must be clean)"
  if racecheck "$GOOD" race-good --only '^ffn/(qwen3|many)'; then echo "CLEAN $GOOD"; else echo "NOT CLEAN $GOOD"; status=1; fi
fi
exit $status

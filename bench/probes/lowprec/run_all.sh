#!/usr/bin/env bash
# Runs the low-precision probes on the GPU machine (H100 / H200, torch + cuda.bindings there; no LLVM,
# no network needed: the cubins beside this script were compiled on the build machine).
#   bash bench/probes/lowprec/run_all.sh          (from the repo root, with $OUT set)
# Writes $OUT/env.txt, $OUT/fp8.log, $OUT/rega.log and $OUT/summary.txt (the PASS / FAIL / RESULT
# lines). Each cubin runs in its own process under a time limit, so a hang or a sticky CUDA error
# in one kernel does not stop the others. Exit status 0 iff every check passed.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${OUT:-$here/out}"
mkdir -p "$OUT"
cd "$here"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv 2>&1
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  python3 -c 'import cuda.bindings; print("cuda.bindings", getattr(cuda.bindings, "__version__", "?"))' 2>&1
  echo "cubins:"; ls -l ./*.cubin 2>&1
  command -v md5sum >/dev/null && md5sum ./*.cubin
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

status=0
run_group() {   # run_group RUNNER LOG CUBIN...
  local runner=$1 log=$2; shift 2
  local c rc
  for c in "$@"; do
    if [ ! -f "$c" ]; then
      echo "FAIL $c: missing (compile on the build machine: see README.md)" | tee -a "$log"; status=1; continue
    fi
    timeout 300 python3 "$runner" "$c" 2>&1 | tee "$OUT/.one" | tee -a "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
      status=1
      if [ "$rc" -eq 124 ]; then
        echo "FAIL $c: timed out (300 s)" | tee -a "$log"
      elif [ "$rc" -ne 1 ] || ! grep -q '^RESULT' "$OUT/.one"; then
        echo "FAIL $c: runner exit status $rc (3 = hang, 4 = CUDA error, 1 without RESULT = crashed)" | tee -a "$log"
      fi
    fi
  done
}

: > "$OUT/fp8.log"; : > "$OUT/rega.log"
run_group fp8_device.py "$OUT/fp8.log" \
  fp8_n128_k128_manual.cubin fp8_n128_k128_tma.cubin fp8_n256_k128_manual.cubin fp8_n256_k128_tma.cubin \
  fp8_n128_k512_tma.cubin fp8_n128_k512_tma_promote.cubin fp8_n256_k512_tma_promote.cubin
run_group rega_device.py "$OUT/rega.log" rega_bf16_n128_k128.cubin rega_mxfp4_n128_k128.cubin

rm -f "$OUT/.one"
grep -h -E '^(PASS|FAIL|RESULT|HANG)' "$OUT/fp8.log" "$OUT/rega.log" > "$OUT/summary.txt"
echo "================ summary"
cat "$OUT/summary.txt"
echo "checks: $(grep -c '^PASS' "$OUT/summary.txt") passed, $(grep -c '^FAIL' "$OUT/summary.txt") failed"
exit $status

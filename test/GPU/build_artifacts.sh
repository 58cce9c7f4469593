#!/usr/bin/env bash
#===- test/GPU/build_artifacts.sh - AOT-compile the GPU test cases --------===#
#
# Usage: bash test/GPU/build_artifacts.sh [OUT_DIR]     (default: <repo>/gpu-artifacts)
#
# For every test/GPU/cases/<name>.mlir builds, with build/bin/moe-aot,
#   OUT_DIR/<name>.unfused.so   --pipeline "--moe-lower-to-nvvm"
#   OUT_DIR/<name>.fused.so     --pipeline "--moe-decompose --moe-fuse --moe-lower-to-nvvm"
# each with its manifest (<name>.<build>.manifest.json, bench/write_manifest.py,
# when the moe_mlir package is built)
# and copies what run_gpu_checks.py needs next to them (the Python files,
# reference.py and op_syntax.py, cases/*.mlir, the runtime package moe_mlir_runtime/ and its
# wheel), plus COMMIT (`git rev-parse HEAD`, "-dirty"
# when the work tree has changes) and BUILD.txt (tools, pipelines, times).
# The folder is then self-contained: carry it to the GPU machine and run
# `bash test/GPU/run_on_h200.sh` there.
#
# Environment:
#   MOE_AOT, MOE_OPT        tools (default build/bin/moe-aot, build/bin/moe-opt)
#   UNFUSED_PIPELINE, FUSED_PIPELINE   override the two pipelines
#   NVVM_OPTIONS            --moe-lower-to-nvvm options for both default
#                           pipelines, e.g. "elide-fills=true warp-select=i32"
#   JOBS                    parallel builds (default: nproc, at most 8)
#   ONLY                    build only case files whose name matches this regex
#                           (and leaves the Python flow out)
#   SKIP_PYFLOW=1           leave out OUT/pyflow (test/GPU/build_python_flow.py,
#                           built when the moe_mlir package is importable)
#   PYFLOW_ARGS             extra build_python_flow.py arguments (e.g. --all)
#   SKIP_LOWPREC=1          leave out OUT/lowprec (test/GPU/lowprec/build_lowprec.py:
#                           the FP8 block / MXFP4 layers of the low-precision check)
#   SKIP_HF=1               leave out OUT/hfparity (test/GPU/build_hf_parity.py:
#                           the presets at small sizes for the comparison with
#                           the Hugging Face blocks, hf_parity_check.py)
#
# Exits non-zero if a case file is stale, fails to verify, or a build fails
# (every build is still attempted; their logs are in OUT_DIR/logs/).
#
#===----------------------------------------------------------------------===#
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(git -C "$HERE" rev-parse --show-toplevel)"
OUT="${1:-$REPO/gpu-artifacts}"
MOE_AOT="${MOE_AOT:-$REPO/build/bin/moe-aot}"
MOE_OPT="${MOE_OPT:-$REPO/build/bin/moe-opt}"
NVVM_FLAG="--moe-lower-to-nvvm"
[ -n "${NVVM_OPTIONS:-}" ] && NVVM_FLAG="\"--moe-lower-to-nvvm=$NVVM_OPTIONS\""
UNFUSED_PIPELINE="${UNFUSED_PIPELINE:-$NVVM_FLAG}"
FUSED_PIPELINE="${FUSED_PIPELINE:---moe-decompose --moe-fuse $NVVM_FLAG}"
JOBS="${JOBS:-$(n=$(nproc); echo $(( n > 8 ? 8 : n )))}"
ONLY="${ONLY:-}"
PY="$(command -v python3)"

die() { echo "build_artifacts: $*" >&2; exit 2; }
[ -x "$MOE_AOT" ] || die "no $MOE_AOT (build it first: bash .ci/setup)"
[ -x "$MOE_OPT" ] || die "no $MOE_OPT (build it first: bash .ci/setup)"
[ -n "$PY" ] || die "python3 not found"

status=0

echo "--- checking test/GPU/cases against gpu_cases.py"
if ! "$PY" "$HERE/gen_mlir.py" --check; then
  echo "build_artifacts: regenerate with: python3 test/GPU/gen_mlir.py" >&2
  status=1
fi

mkdir -p "$OUT/logs" "$OUT/cases"
rm -f "$OUT"/*.so "$OUT"/*.manifest.json "$OUT"/logs/* "$OUT"/cases/*.mlir "$OUT"/COMMIT \
  "$OUT"/BUILD.txt

cases=()
for f in "$HERE"/cases/*.mlir; do
  name="$(basename "$f" .mlir)"
  if [ -n "$ONLY" ] && ! [[ "$name" =~ $ONLY ]]; then continue; fi
  cases+=("$name")
done
[ "${#cases[@]}" -gt 0 ] || die "no case files selected"

echo "--- verifying ${#cases[@]} case files with moe-opt"
for name in "${cases[@]}"; do
  f="$HERE/cases/$name.mlir"
  if ! "$MOE_OPT" "$f" > /dev/null 2> "$OUT/logs/$name.verify.log"; then
    echo "FAIL verify $name (see logs/$name.verify.log)"; status=1; continue
  fi
  if ! "$MOE_OPT" --moe-decompose --moe-fuse "$f" > /dev/null 2>> "$OUT/logs/$name.verify.log"; then
    echo "FAIL verify $name after --moe-decompose --moe-fuse"; status=1
  fi
done

# One build: NAME BUILD PIPELINE. Writes logs/NAME.BUILD.{log,status}.
build_one() {
  local name="$1" build="$2" pipeline="$3"
  local so="$OUT/$name.$build.so" log="$OUT/logs/$name.$build.log"
  local t0=$SECONDS rc
  {
    echo "\$ $MOE_AOT $HERE/cases/$name.mlir -o $so --pipeline \"$pipeline\""
    "$MOE_AOT" "$HERE/cases/$name.mlir" -o "$so" --pipeline "$pipeline"
  } > "$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && [ ! -s "$so" ]; then
    echo "moe-aot exited 0 but wrote no $so" >> "$log"; rc=1
  fi
  # Its manifest (signatures read off the IR, the library's sha256), which
  # run_gpu_checks.py's sig/ checks compare with gpu_cases.py's table.
  if [ $rc -eq 0 ] && [ "$MANIFESTS" = 1 ]; then
    "$PY" "$REPO/bench/write_manifest.py" "$HERE/cases/$name.mlir" "$so" \
      "--pipeline=$pipeline" >> "$log" 2>&1 || rc=1
  fi
  echo "$rc $(( SECONDS - t0 ))" > "$OUT/logs/$name.$build.status"
}

# Manifests need the moe_mlir package (bench/write_manifest.py).
MANIFESTS=0
if "$PY" -c "import sys; sys.path.insert(0, '$REPO/build/python_packages'); import moe_mlir.gpu" \
    > /dev/null 2>&1; then
  MANIFESTS=1
else
  echo "--- no moe_mlir package: libraries without manifests (the sig/ checks are skipped)"
fi

echo "--- building $(( ${#cases[@]} * 2 )) shared libraries ($JOBS at a time)"
running=0
for name in "${cases[@]}"; do
  for build in unfused fused; do
    if [ "$build" = unfused ]; then p="$UNFUSED_PIPELINE"; else p="$FUSED_PIPELINE"; fi
    build_one "$name" "$build" "$p" &
    running=$(( running + 1 ))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$(( running - 1 )); fi
  done
done
wait

for name in "${cases[@]}"; do
  for build in unfused fused; do
    st="$OUT/logs/$name.$build.status"
    read -r rc secs < "$st" 2>/dev/null || { rc=99; secs=0; }
    so="$OUT/$name.$build.so"
    if [ "$rc" = 0 ]; then
      size=$(du -k "$so" | cut -f1)
      printf 'ok   %-28s %-8s %5ss %7s KiB\n' "$name" "$build" "$secs" "$size"
      # The GPU machine has no LLVM: a dependency on an LLVM/MLIR library
      # (or anything unresolved here) will not load there.
      deps=$(ldd "$so" 2>/dev/null | grep -E 'not found|llvm|libMLIR|libmlir' || true)
      if [ -n "$deps" ]; then
        echo "     WARNING: $name.$build.so depends on libraries the GPU machine lacks:"
        echo "$deps" | sed 's/^/       /'
      fi
    else
      printf 'FAIL %-28s %-8s (exit %s, %ss) -- last lines of logs/%s.%s.log:\n' \
        "$name" "$build" "$rc" "$secs" "$name" "$build"
      tail -n 15 "$OUT/logs/$name.$build.log" | sed 's/^/     /'
      status=1
    fi
  done
done

echo "--- copying the harness"
cp "$REPO/test/Differential/reference.py" "$REPO/test/Differential/op_syntax.py" "$OUT/"
for f in "$HERE"/*.py; do
  cp "$f" "$OUT/"
done
[ -f "$OUT/memref_abi.py" ] || { echo "FAIL: test/GPU/memref_abi.py is missing"; status=1; }
# memref_abi.py is a shim over the GPU runtime package moe_mlir_runtime
# (python/runtime): its folder goes next to the scripts, which import it in
# place, with its wheel for `pip install --no-deps --no-index` there.
rm -f "$OUT/runtime.py"   # the single file shipped before the package
"$PY" "$REPO/python/runtime/ship.py" "$OUT" > "$OUT/logs/runtime.log" 2>&1 \
  || { echo "FAIL: python/runtime/ship.py (logs/runtime.log)"; status=1; }
cp "$HERE"/cases/*.mlir "$OUT/cases/"
cp "$HERE/run_on_h200.sh" "$OUT/" 2>/dev/null || true

# The Python flow (python_flow_check.py): model presets built with the
# moe_mlir package into OUT/pyflow, when the package is importable.
# SKIP_PYFLOW=1 leaves it out; PYFLOW_ARGS adds build_python_flow.py options.
pyflow_status=skipped
if [ "${SKIP_PYFLOW:-0}" != 1 ] && [ -z "$ONLY" ]; then
  if probe="$("$PY" "$HERE/build_python_flow.py" --probe 2>&1)"; then
    echo "--- building the Python-flow artifacts into $OUT/pyflow ($probe)"
    read -r -a PYFLOW_EXTRA <<< "${PYFLOW_ARGS:-}"
    if "$PY" "$HERE/build_python_flow.py" "$OUT/pyflow" "${PYFLOW_EXTRA[@]}" \
        > "$OUT/logs/pyflow.log" 2>&1; then
      pyflow_status=0
      sed 's/^/     /' "$OUT/logs/pyflow.log"
    else
      pyflow_status=1; status=1
      echo "FAIL build_python_flow.py -- logs/pyflow.log:"
      tail -n 30 "$OUT/logs/pyflow.log" | sed 's/^/     /'
    fi
  else
    rm -rf "$OUT/pyflow"
    echo "--- Python flow skipped: $probe"
  fi
elif [ -z "$ONLY" ]; then
  rm -rf "$OUT/pyflow"   # never carry stale Python-flow artifacts
fi

# The Hugging Face parity check (hf_parity_check.py) into OUT/hfparity.
hf_status=skipped
if [ "${SKIP_HF:-0}" != 1 ] && [ -z "$ONLY" ] && [ "$pyflow_status" != skipped ]; then
  echo "--- building the Hugging Face parity artifacts into $OUT/hfparity"
  if "$PY" "$HERE/build_hf_parity.py" "$OUT/hfparity" > "$OUT/logs/hfparity.log" 2>&1; then
    hf_status=0
    sed 's/^/     /' "$OUT/logs/hfparity.log"
  else
    hf_status=1; status=1
    echo "FAIL build_hf_parity.py -- logs/hfparity.log:"
    tail -n 30 "$OUT/logs/hfparity.log" | sed 's/^/     /'
  fi
elif [ -z "$ONLY" ]; then
  rm -rf "$OUT/hfparity"
fi

# The low-precision check (test/GPU/lowprec) into OUT/lowprec: FP8 block and
# MXFP4 layers built with the moe_mlir package. SKIP_LOWPREC=1 leaves it out.
lowprec_status=skipped
if [ "${SKIP_LOWPREC:-0}" != 1 ] && [ -z "$ONLY" ] && [ "$pyflow_status" != skipped ]; then
  echo "--- building the low-precision artifacts into $OUT/lowprec"
  if "$PY" "$HERE/lowprec/build_lowprec.py" "$OUT/lowprec" > "$OUT/logs/lowprec.log" 2>&1; then
    lowprec_status=0
    sed 's/^/     /' "$OUT/logs/lowprec.log"
  else
    lowprec_status=1; status=1
    echo "FAIL build_lowprec.py -- logs/lowprec.log:"
    tail -n 30 "$OUT/logs/lowprec.log" | sed 's/^/     /'
  fi
elif [ -z "$ONLY" ]; then
  rm -rf "$OUT/lowprec"
fi

# The PyTorch-integration check (test/GPU/torchint) into OUT/torchint: needs
# torch and transformers here (or $TORCHINT_PYTHON, an interpreter that has
# them); skipped without. SKIP_TORCHINT=1 leaves it out.
torchint_status=skipped
if [ "${SKIP_TORCHINT:-0}" != 1 ] && [ -z "$ONLY" ] && [ "$pyflow_status" != skipped ]; then
  "$PY" "$HERE/torchint/build_torchint.py" "$OUT/torchint" > "$OUT/logs/torchint.log" 2>&1
  case $? in
    0) torchint_status=0; echo "--- built the PyTorch-integration artifacts into $OUT/torchint" ;;
    3) rm -rf "$OUT/torchint"; echo "--- PyTorch-integration artifacts skipped (no torch / transformers here)" ;;
    *) torchint_status=1; status=1
       echo "FAIL build_torchint.py -- logs/torchint.log:"
       tail -n 30 "$OUT/logs/torchint.log" | sed 's/^/     /' ;;
  esac
elif [ -z "$ONLY" ]; then
  rm -rf "$OUT/torchint"
fi

commit="$(git -C "$REPO" rev-parse HEAD)"
# Dirty: tracked changes or untracked files, not counting the output folder.
excl=()
case "$(realpath "$OUT")/" in
  "$(realpath "$REPO")"/*) excl=(":(exclude)$(realpath --relative-to="$REPO" "$OUT")") ;;
esac
if ! dirty="$(git -C "$REPO" status --porcelain -- . "${excl[@]}")"; then
  dirty="unknown"
fi
if [ -n "$dirty" ]; then
  commit="$commit-dirty"
fi
echo "$commit" > "$OUT/COMMIT"
{
  echo "commit:   $commit"
  echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:     $(hostname)"
  echo "moe-aot:  $MOE_AOT"
  echo "unfused:  $UNFUSED_PIPELINE"
  echo "fused:    $FUSED_PIPELINE"
  echo "cases:    ${cases[*]}"
  echo "pyflow:   $pyflow_status"
  echo "hfparity: $hf_status"
  echo "lowprec:  $lowprec_status"
  echo "torchint: $torchint_status"
  echo "status:   $status"
} > "$OUT/BUILD.txt"

echo "--- $OUT ($(du -sh "$OUT" | cut -f1)), commit $commit"
if [ "$status" != 0 ]; then
  echo "build_artifacts: FAILED (see above)" >&2
fi
exit "$status"

#!/usr/bin/env bash
#===- bench/build_bench.sh - compile the issue-10 benchmark layers --------===#
#
# Usage: bash bench/build_bench.sh [OUT_DIR]        (default: <repo>/bench-artifacts)
#
# Runs here (LLVM, build/bin/moe-aot; no GPU needed). For every layer of
# bench/gen_layers.py:
#   OUT_DIR/layers/<name>.mlir       the layer (gen_layers.py)
#   OUT_DIR/<name>.so                moe-aot --pipeline "$PIPELINE"
#   OUT_DIR/<name>.manifest.json     what moe_mlir_runtime checks calls against
# then copies what bench_moe.py needs next to them (bench_moe.py,
# gen_layers.py, torch_reference.py, triton_kernels_bench.py for its
# --triton-kernels baseline, bench_lowprec.py and lowprec_baselines.py for
# its --weight-format fp8_block / mxfp4 cells, and the runtime package
# moe_mlir_runtime/ with its wheel, by python/runtime/ship.py) and writes COMMIT
# (`git rev-parse HEAD`, "-dirty" when the work tree has changes) and
# BUILD.txt (tools, pipeline, compile time of every layer against the
# issue's 2 s bound). The folder is self-contained: carry it to the GPU
# machine (torch, no LLVM) and run there
#   python3 OUT_DIR/bench_moe.py --dir OUT_DIR --out "$OUT"
#
# Layers are compiled one at a time so that the recorded compile times are
# not inflated by each other.
#
# Environment:
#   MOE_AOT, MOE_OPT   tools (default build/bin/moe-aot, build/bin/moe-opt)
#   PIPELINE           moe-aot --pipeline flags
#   NVVM_OPTIONS       --moe-lower-to-nvvm options for the default pipeline
#                      (e.g. "wgmma-split-short=true"; ignored with PIPELINE)
#                      (default "--moe-decompose --moe-fuse --moe-lower-to-nvvm")
#   AOT_ARGS           extra moe-aot options, shell-split (e.g. "--cxx clang++")
#   LAYERS             comma-separated layer names (default: all; see
#                      `python3 bench/gen_layers.py --list`)
#   LOWPREC            non-empty (without LAYERS): the layers of
#                      bench_moe.py --weight-format fp8_block / mxfp4
#                      instead, i.e. <config>.fp8 and their bf16 twins
#                      <config>.concat, gpt-oss-120b.mxfp4 and its bf16 twin
#                      gpt-oss-120b.oss (`python3 bench/gen_layers.py
#                      --lowprec --list`); LOWPREC=fp8 or LOWPREC=mxfp4: only
#                      that format's layers and twins; build them into their
#                      own OUT_DIR (this script empties OUT_DIR first), e.g.
#                      bench-variants/fp8-artifacts, bench-variants/mxfp4-artifacts
#
# Exit status: 0 when every layer verified and compiled, 1 otherwise (every
# layer is still attempted; logs in OUT_DIR/logs/). A compile over 2 s is
# reported in BUILD.txt, not an error.
#
#===----------------------------------------------------------------------===#
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(git -C "$HERE" rev-parse --show-toplevel)"
OUT="${1:-$REPO/bench-artifacts}"
MOE_AOT="${MOE_AOT:-$REPO/build/bin/moe-aot}"
MOE_OPT="${MOE_OPT:-$REPO/build/bin/moe-opt}"
NVVM_FLAG="--moe-lower-to-nvvm"
[ -n "${NVVM_OPTIONS:-}" ] && NVVM_FLAG="\"--moe-lower-to-nvvm=$NVVM_OPTIONS\""
PIPELINE="${PIPELINE:---moe-decompose --moe-fuse $NVVM_FLAG}"
read -r -a AOT_EXTRA <<< "${AOT_ARGS:-}"
PY="$(command -v python3)"
COMPILE_BOUND_S=2

die() { echo "build_bench: $*" >&2; exit 2; }
[ -x "$MOE_AOT" ] || die "no $MOE_AOT (build it first: bash .ci/setup)"
[ -x "$MOE_OPT" ] || die "no $MOE_OPT (build it first: bash .ci/setup)"
[ -n "$PY" ] || die "python3 not found"

mkdir -p "$OUT/layers" "$OUT/logs"
rm -f "$OUT"/*.so "$OUT"/*.manifest.json "$OUT"/layers/*.mlir "$OUT"/logs/* \
      "$OUT"/COMMIT "$OUT"/BUILD.txt

status=0
layer_args=()
case "${LOWPREC:-}" in
  "") ;;
  fp8|mxfp4) layer_args=(--lowprec --lowprec-format "$LOWPREC") ;;
  *) layer_args=(--lowprec) ;;
esac
[ -n "${LAYERS:-}" ] && layer_args=(--layers "$LAYERS")
"$PY" "$HERE/gen_layers.py" "$OUT/layers" "${layer_args[@]}" > /dev/null \
  || die "gen_layers.py failed"

times=()
echo "--- compiling $(ls "$OUT"/layers/*.mlir | wc -l) layers: moe-aot --pipeline \"$PIPELINE\""
for f in "$OUT"/layers/*.mlir; do
  name="$(basename "$f" .mlir)"
  so="$OUT/$name.so"
  log="$OUT/logs/$name.log"
  if ! "$MOE_OPT" "$f" > /dev/null 2> "$OUT/logs/$name.verify.log"; then
    echo "FAIL verify $name (logs/$name.verify.log)"; status=1; continue
  fi
  t0=$(date +%s.%N)
  "$MOE_AOT" "$f" -o "$so" --pipeline "$PIPELINE" -v "${AOT_EXTRA[@]}" > "$log" 2>&1
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  if [ $rc -ne 0 ] || [ ! -s "$so" ]; then
    printf 'FAIL %-24s (exit %s) -- last lines of logs/%s.log:\n' "$name" "$rc" "$name"
    tail -n 15 "$log" | sed 's/^/     /'
    status=1; continue
  fi
  if ! "$PY" "$HERE/write_manifest.py" "$f" "$so" --pipeline "$PIPELINE" \
      --compile-s "$secs" >> "$log" 2>&1; then
    echo "FAIL manifest $name (logs/$name.log)"; status=1; continue
  fi
  # per-step times of `moe-aot -v` ("moe-aot: [moe-opt] done in 1.71 s")
  steps=$(sed -n 's/^moe-aot: \[\([a-z-]*\)\] done in \([0-9.]*\) s$/\1 \2/p' "$log" | paste -sd ' ' -)
  verdict=ok
  awk -v s="$secs" -v b="$COMPILE_BOUND_S" 'BEGIN { exit !(s > b) }' && verdict=SLOW
  line=$(printf '%-24s %6.2f s  %-4s  %5s KiB  (%s)' "$name" "$secs" "$verdict" \
         "$(du -k "$so" | cut -f1)" "$steps")
  echo "ok   $line"
  times+=("$line")
  # The GPU machine has no LLVM; libcuda.so.1 (the driver) is there, not here.
  deps=$(ldd "$so" 2>/dev/null | grep -E 'not found|llvm|libMLIR|libmlir' | grep -v libcuda || true)
  if [ -n "$deps" ]; then
    echo "     FAIL: $name.so depends on libraries the GPU machine lacks:"
    echo "$deps" | sed 's/^/       /'
    status=1
  fi
done

echo "--- copying the benchmark"
cp "$HERE/bench_moe.py" "$HERE/gen_layers.py" "$HERE/ncu_driver.py" "$HERE/repeat_check.py" \
  "$HERE/triton_kernels_bench.py" "$HERE/bench_lowprec.py" "$HERE/lowprec_baselines.py" \
  "$OUT/" || status=1
rm -f "$OUT/runtime.py"   # the single file shipped before the package
"$PY" "$REPO/python/runtime/ship.py" "$OUT" > "$OUT/logs/runtime.log" 2>&1 || status=1
cp "$REPO/test/GPU/torch_reference.py" "$OUT/" || status=1

commit="$(git -C "$REPO" rev-parse HEAD)"
# Dirty: tracked changes or untracked files, not counting the output folder.
excl=()
case "$(realpath "$OUT")/" in
  "$(realpath "$REPO")"/*) excl=(":(exclude)$(realpath --relative-to="$REPO" "$OUT")") ;;
esac
if ! dirty="$(git -C "$REPO" status --porcelain -- . "${excl[@]}")"; then
  dirty="unknown"
fi
[ -n "$dirty" ] && commit="$commit-dirty"
echo "$commit" > "$OUT/COMMIT"
{
  echo "commit:   $commit"
  echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:     $(hostname) ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "moe-aot:  $MOE_AOT ${AOT_EXTRA[*]}"
  echo "pipeline: $PIPELINE"
  echo "status:   $status"
  echo
  echo "compile time per layer (moe-aot wall time, bound ${COMPILE_BOUND_S} s; steps of moe-aot -v):"
  for line in "${times[@]}"; do echo "  $line"; done
} > "$OUT/BUILD.txt"

echo "--- $OUT ($(du -sh "$OUT" | cut -f1)), commit $commit"
sed -n '/^compile time/,$p' "$OUT/BUILD.txt"
[ "$status" != 0 ] && echo "build_bench: FAILED (see above)" >&2
exit "$status"

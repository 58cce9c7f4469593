#!/usr/bin/env bash
#===- bench/ncu_kernels.sh - ncu reports of chosen kernels of one call ----===#
#
# On the GPU machine, from the repository root, with bench-artifacts/
# (bench/build_bench.sh) carried along:
#
#   bash bench/ncu_kernels.sh gpt-oss-120b:16384:4 qwen3-30b-a3b:4096:5 ...
#
# Each argument is LAYER:T:INDEX, INDEX the kernel's position in one call of
# the layer (the order of the benchmark's --profile table: 4 = the GLU GEMM,
# 5 = the down GEMM, 6 = combine for the large-T cells). For each, ncu
# collects the speed-of-light, compute, memory, warp-state, scheduler and
# launch sections and the source counters (sampled stalls per SASS
# instruction) of that one launch, and writes to $OUT (default ./ncu-out)
#   LAYER-T-INDEX.txt        ncu --print-details all of the report
#   LAYER-T-INDEX-sass.csv   the source page (SASS, per-instruction samples)
# all packed into ncu.tar.gz (the device tool brings back 8 files at most).
# DIR (default bench-artifacts) is the artifacts folder, NCU the ncu binary.
#
#===----------------------------------------------------------------------===#
set -uo pipefail
DIR="${DIR:-bench-artifacts}"
RES="${OUT:-$PWD/ncu-out}"
mkdir -p "$RES/ncu"
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
status=0
for spec in "$@"; do
  IFS=: read -r layer T index <<< "$spec"
  name="$layer-$T-$index"
  echo "=== $name"
  t0=$SECONDS
  "$NCU" --clock-control none -k regex:ffn_kernel --launch-skip "$index" \
    --launch-count 1 --import-source no \
    --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section Occupancy \
    --section SourceCounters --section InstructionStats \
    -f -o "$RES/ncu/$name" \
    python3 "$DIR/ncu_driver.py" --dir "$DIR" --layer "$layer" --T "$T" \
    --calls 1 > "$RES/ncu/$name.log" 2>&1 || status=1
  "$NCU" --import "$RES/ncu/$name.ncu-rep" --print-details all \
    > "$RES/ncu/$name.txt" 2>&1 || status=1
  "$NCU" --import "$RES/ncu/$name.ncu-rep" --page source --csv \
    --print-source sass > "$RES/ncu/$name-sass.csv" 2>&1 || status=1
  echo "    $((SECONDS - t0)) s; $(grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput' "$RES/ncu/$name.txt" | head -n 3 | tr -s ' ' | tr '\n' ';')"
done
tar -C "$RES" -czf "$RES/ncu.tar.gz" ncu && rm -rf "$RES/ncu"
exit $status

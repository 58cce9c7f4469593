#!/usr/bin/env bash
#===- bench/energy_ab.sh - compare builds by energy per call on the H200 ---===#
#
# The large cells run at the H200's 700 W power cap, where time follows
# energy per call (bench/NOTES.md, results at 51af224): this compares
# bench/build_bench.sh folders by steady-state time and board energy per
# call, over windows long enough for NVML's coarse energy counter (SECONDS
# per cell, up to 3000 runs), the folders taking turns (ROUNDS rounds).
#
# Here (LLVM): one folder per variant, e.g.
#   LAYERS=gpt-oss-120b bash bench/build_bench.sh bench-variants/base
#   LAYERS=gpt-oss-120b NVVM_OPTIONS="wgmma-cluster=1" \
#     bash bench/build_bench.sh bench-variants/cl1
# There, from the repository root:
#   bash bench/energy_ab.sh bench-variants/base bench-variants/cl1
#
# Environment: ROUNDS (default 2), CONFIGS (default gpt-oss-120b,
# deepseek-v3,qwen3-30b-a3b), TS (default 16384), SECONDS_PER_CELL
# (default 3), OUT (default ./energy-ab), BENCH_ARGS (more bench_moe.py
# arguments, e.g. "--routing balanced"). Per folder and round:
# OUT/<name>.<round>/ (bench_moe.py's .md / .json, every run's time) and a
# line per cell in OUT/summary.txt: median, first / last 10% medians (us),
# energy per call (mJ, L2 flush included), median board power (W); at the
# end OUT/ratios.txt: per cell, each folder's mean median time and energy
# per call over the rounds, and their change against the first folder.
#
#===----------------------------------------------------------------------===#
set -uo pipefail
ROUNDS="${ROUNDS:-2}"
CONFIGS="${CONFIGS:-gpt-oss-120b,deepseek-v3,qwen3-30b-a3b}"
TS="${TS:-16384}"
SECS="${SECONDS_PER_CELL:-3}"
OUT="${OUT:-$(pwd)/energy-ab}"
[ $# -ge 1 ] || { echo "usage: bench/energy_ab.sh DIR..." >&2; exit 2; }
mkdir -p "$OUT"
for d in "$@"; do
  [ -f "$d/bench_moe.py" ] || { echo "energy_ab: $d has no bench_moe.py" >&2; exit 2; }
done
: > "$OUT/summary.txt"
for r in $(seq 1 "$ROUNDS"); do
  for d in "$@"; do
    n="$(basename "$d").$r"
    BENCH_DUMP_TIMES=1 python3 "$d/bench_moe.py" --dir "$d" --out "$OUT/$n" --only-built \
      --skip-baselines --configs "$CONFIGS" --T "$TS" --budget 300 --max-runs 3000 \
      --max-seconds-per-cell "$SECS" ${BENCH_ARGS:-} > "$OUT/$n.txt" 2>&1
    echo "energy_ab: $n rc=$?"
    python3 - "$OUT/$n" "$n" <<'PY' | tee -a "$OUT/summary.txt"
import glob, json, sys
out, name = sys.argv[1], sys.argv[2]
for path in glob.glob(out + "/*.json"):
    for c in json.load(open(path))["cells"]:
        if c.get("ours_us") is None:
            print("%s %s T=%d: no timing" % (name, c["layer"], c["T"]))
            continue
        print(
            "%s %s T=%d: runs %d median %.0f first10%% %.0f last10%% %.0f mJ/call %s W %s ok %s"
            % (name, c["layer"], c["T"], c["ours_runs"], c["ours_us"], c.get("ours_first_us", 0),
               c.get("ours_last_us", 0), c.get("ours_energy_mj", "-"), c.get("ours_power_w", "-"),
               c.get("ours_pass"))
        )
PY
  done
done
# Per cell, each folder against the first (means over the rounds): median
# time and energy per call, and their ratios.
python3 - "$OUT/summary.txt" <<'PY' | tee "$OUT/ratios.txt"
import re, sys
from collections import defaultdict
cells = defaultdict(lambda: defaultdict(list))
order = []
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\.\d+ (\S+) T=(\d+): runs \d+ median (\S+) .* mJ/call (\S+)", line)
    if not m:
        continue
    name, layer, T, us, mj = m.groups()
    if name not in order:
        order.append(name)
    try:
        cells[(layer, int(T))][name].append((float(us), float(mj)))
    except ValueError:
        pass
for (layer, T), by in sorted(cells.items()):
    base = by.get(order[0])
    if not base:
        continue
    bus = sum(u for u, _ in base) / len(base)
    bmj = sum(e for _, e in base) / len(base)
    parts = ["%s %.0f us %.0f mJ" % (order[0], bus, bmj)]
    for name in order[1:]:
        if by.get(name):
            us = sum(u for u, _ in by[name]) / len(by[name])
            mj = sum(e for _, e in by[name]) / len(by[name])
            parts.append("%s %.0f us (%+.1f%%) %.0f mJ (%+.1f%%)"
                         % (name, us, 100 * (us / bus - 1), mj, 100 * (mj / bmj - 1)))
    print("%s T=%d: %s" % (layer, T, "; ".join(parts)))
PY

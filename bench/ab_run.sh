#!/usr/bin/env bash
#===- bench/ab_run.sh - compare builds of the benchmark on the H200 -------===#
#
# Same-run comparisons of bench/build_bench.sh folders (one per variant),
# as bench/NOTES.md records them: each folder's layers are timed ours-only
# (no baselines), the folders taking turns (ROUNDS rounds), so that clock
# and machine drift hit every variant alike.
#
# Here (LLVM), one folder per variant, e.g.:
#   bash bench/build_bench.sh bench-variants/base
#   PIPELINE='--moe-decompose --moe-fuse "--moe-lower-to-nvvm=wgmma-split-short=true"' \
#     bash bench/build_bench.sh bench-variants/split
# (bench-variants/ is git-ignored; carry it to the GPU machine.) There, from
# the repository root:
#   bash bench/ab_run.sh bench-variants/base bench-variants/split
#
# Environment: ROUNDS (default 2), CONFIGS (default the four layers), TS
# (default 512,4096,16384), PROFILE (default qwen3-30b-a3b:4096,
# deepseek-v3:4096; per-kernel times of one call), BUDGET (seconds per
# folder and round, default 50), VARIANTS=1 (also the folders' layout
# variants, e.g. <config>.nt), OUT (default ./ab-results). A folder's ENV
# file (one VAR=value per line) sets the environment of its runs. Per folder and
# round: OUT/<name>.<round>.txt (bench_moe.py's output) and OUT/<name>.<round>/
# (its .md / .json); a summary table (us per cell, variants side by side)
# is printed and written to OUT/summary.txt.
#
#===----------------------------------------------------------------------===#
set -uo pipefail
ROUNDS="${ROUNDS:-2}"
CONFIGS="${CONFIGS:-qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3}"
TS="${TS:-512,4096,16384}"
PROFILE="${PROFILE:-qwen3-30b-a3b:4096,deepseek-v3:4096}"
BUDGET="${BUDGET:-50}"
OUT="${OUT:-$(pwd)/ab-results}"
VARIANT_FLAG=()
[ "${VARIANTS:-0}" = 1 ] && VARIANT_FLAG=(--variants)
[ $# -ge 1 ] || { echo "usage: bench/ab_run.sh DIR..." >&2; exit 2; }
mkdir -p "$OUT"
for d in "$@"; do
  [ -f "$d/bench_moe.py" ] || { echo "ab_run: $d has no bench_moe.py" >&2; exit 2; }
done
for r in $(seq 1 "$ROUNDS"); do
  for d in "$@"; do
    n="$(basename "$d").$r"
    # A folder's ENV file (VAR=value lines) sets its run's environment.
    env_args=()
    [ -f "$d/ENV" ] && mapfile -t env_args < "$d/ENV"
    env "${env_args[@]}" python3 "$d/bench_moe.py" --dir "$d" --out "$OUT/$n" --skip-baselines --only-built \
      --configs "$CONFIGS" --T "$TS" --max-seconds-per-cell 1 \
      --budget "$BUDGET" --profile "$PROFILE" "${VARIANT_FLAG[@]}" > "$OUT/$n.txt" 2>&1
    echo "ab_run: $n rc=$?"
  done
done
python3 - "$OUT" "$ROUNDS" "$@" <<'EOF' | tee "$OUT/summary.txt"
import glob, json, os, sys
out, rounds, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
names = [os.path.basename(d.rstrip("/")) for d in dirs]
cells, table = [], {}
for name in names:
    for r in range(1, rounds + 1):
        for path in glob.glob(os.path.join(out, "%s.%d" % (name, r), "*.json")):
            for c in json.load(open(path)).get("cells", []):
                key = (c.get("layer"), c.get("T"))
                if key not in cells:
                    cells.append(key)
                us = c.get("ours_us")
                ok = c.get("ours_pass", True)
                table.setdefault(key, {}).setdefault(name, []).append(
                    "%s%s" % ("%.0f" % us if us else "-", "" if ok else "!"))
print("cell | " + " | ".join(names) + "   (us per round; ! = output not ok)")
for key in cells:
    row = table.get(key, {})
    print("%s T=%s | %s" % (key[0], key[1],
          " | ".join("/".join(row.get(n, ["-"])) for n in names)))
EOF

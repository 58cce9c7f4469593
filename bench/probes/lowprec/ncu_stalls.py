#!/usr/bin/env python3
"""Summarises an ncu report's warp stalls for one kernel (on the GPU
machine, where ncu is): the stall reasons per issued instruction and the
SASS lines with the most stall samples. Usage:

  python3 ncu_stalls.py REPORT.ncu-rep KERNEL_REGEX [--top 40]
"""

import argparse
import csv
import io
import re
import subprocess


def ncu(*args):
    return subprocess.run(["ncu", *args], capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("kernel")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    raw = ncu(
        "--import",
        a.report,
        "--page",
        "raw",
        "--csv",
        "-k",
        "regex:" + a.kernel,
        "--metrics",
        "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio",
    )
    rows = list(csv.reader(io.StringIO(raw)))
    if len(rows) > 2:
        head = rows[0]
        for r in rows[2:3]:
            pairs = [
                (
                    float(v.replace(",", "")),
                    re.sub(r"smsp__average_warps_issue_stalled_|_per_issue_active\.ratio", "", h),
                )
                for h, v in zip(head, r)
                if h.startswith("smsp__average_warps_issue_stalled")
                and v.replace(",", "").replace(".", "").isdigit()
            ]
            print("stalls per issued instruction (one launch):")
            for v, n in sorted(pairs, reverse=True)[:14]:
                print("  %-24s %.2f" % (n, v))
    src = ncu(
        "--import",
        a.report,
        "--page",
        "source",
        "--csv",
        "--print-source",
        "sass",
        "-k",
        "regex:" + a.kernel,
        "--launch-count",
        "1",
    )
    rows = list(csv.reader(io.StringIO(src)))
    hi = next((i for i, r in enumerate(rows) if "Source" in r), None)
    if hi is None:
        print("no source page")
        return
    head = rows[hi]
    col = next((i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
    srci = head.index("Source")
    data = []
    for r in rows[hi + 1 :]:
        try:
            data.append((float(r[col].replace(",", "")), r[srci]))
        except (ValueError, IndexError, TypeError):
            pass
    total = sum(v for v, _ in data) or 1
    print("SASS lines by stall samples (%d lines, %.0f samples):" % (len(data), total))
    lines = [r[srci] if len(r) > srci else "" for r in rows[hi + 1 :]]
    samples = {}
    for i, r in enumerate(rows[hi + 1 :]):
        try:
            samples[i] = float(r[col].replace(",", ""))
        except (ValueError, IndexError, TypeError):
            samples[i] = 0.0
    for i in sorted(samples, key=samples.get, reverse=True)[: a.top]:
        print("  %5.1f%%  %s" % (100 * samples[i] / total, lines[i][:100]))
        for j in range(max(0, i - 3), i):
            print("            | %s" % lines[j][:96])
    ex = next((k for k, h in enumerate(head) if h.startswith("Instructions Executed")), None)
    if ex is None:
        return
    counts = []
    for r in rows[hi + 1 :]:
        try:
            counts.append(float(r[ex].replace(",", "")))
        except (ValueError, IndexError, TypeError):
            counts.append(0.0)
    whole = sum(counts) or 1
    print("executed warp instructions and stall samples by 48-line window (%.0f in all):" % whole)
    for w in range(0, len(counts), 48):
        part = sum(counts[w : w + 48])
        stalled = sum(samples.get(i, 0.0) for i in range(w, w + 48))
        if part / whole < 0.01 and stalled / total < 0.01:
            continue
        tags = sorted(
            {
                t
                for t in ("HGMMA", "LDGSTS", "UTMALDG", "SYNCS", "LDS", "HMUL2", "STG", "NANOSLEEP")
                for x in lines[w : w + 48]
                if t in x
            }
        )
        print(
            "  lines %4d-%4d inst %5.1f%% stall %5.1f%%  %s  | %s"
            % (w, w + 47, 100 * part / whole, 100 * stalled / total, ",".join(tags), lines[w][:50])
        )


if __name__ == "__main__":
    main()

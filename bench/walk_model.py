#!/usr/bin/env python3
"""A model of the Hopper engine's work walk with tail units
(WgmmaKernel::forEachClusterItem, lib/Conversion/MoeToGPU/Gemm/
WgmmaEngine.cpp), checked for coverage: for random expert groupings and
column-tile counts, with and without 2-CTA coupling and tail units, every
(row, column tile) of every expert is stored by exactly one (CTA, consumer
warpgroup), and both CTAs of a pair are on the same kind of unit (tail or
tile: their K step counts must agree). It mirrors the C++ rules by hand
(it is not generated from them): update it with the walk. Run:
python3 bench/walk_model.py [--trials N] (CPU only, ~15 s at the default
3000; test/Pipelines/walk-model.test runs a sample in lit)."""

import argparse
import random


def units_of(rows, C, shift, tails, tileM=128):
    if tails:
        whole, rest = rows // tileM, rows % tileM
        is_tail = rest <= 64
        tiles = whole + (0 if is_tail else 1)
        tail_rows = rest if is_tail else 0
    else:
        tiles, tail_rows = -(-rows // tileM), 0
    pairs, odd = tiles >> shift, tiles & shift
    u = pairs * C + odd * ((C + 1) // 2)
    if tails and tail_rows:
        per = 2 << shift
        u += (C + per - 1) // per
    return u, tiles, tail_rows


def walk(offs, C, shift, tails, rank, grouped, tileM=128):
    E = len(offs) - 1
    items = []
    for e in range(E):
        lo, hi = offs[e], offs[e + 1]
        rows = max(hi, lo) - lo
        U, tiles, tail_rows = units_of(rows, C, shift, tails)
        for local in range(U):
            pairs, odd = tiles >> shift, tiles & shift
            oddUnits = odd * ((C + 1) // 2)
            core = pairs * C + oddUnits
            safe = max(pairs, 1)
            if grouped:
                # wgmma-grouped-walk: groups of two column tiles, the pairs
                # of the first, then of the second, then the odd last row
                # tile's unit (both columns)
                group_units = max(2 * pairs + odd, 1)
                group, in_group = local // group_units, local % group_units
                first_col = 2 * group
                group_cols = min(C - first_col, 2)
                inPairs = local < core and in_group < group_cols * pairs
                pairCol, pair = first_col + in_group // safe, in_group % safe
            else:
                # default: every column's pairs, then the odd tile's units
                inPairs = local < pairs * C
                pairCol, pair = local // safe, local % safe
                first_col = 0 if inPairs else 2 * (local - pairs * C)
            col = pairCol if inPairs else first_col + rank
            rowTile = ((pair << shift) + rank) if inPairs else max(tiles, 1) - 1
            rowStart = lo + rowTile * tileM
            tail = False
            if tails:
                tail = tail_rows != 0 and local >= core
                if tail:
                    col = (local - core) * (2 << shift) + 2 * rank
                    rowStart = lo + tiles * tileM
            has = rowStart < hi and col < C
            tileRows = min(hi - rowStart, tileM) if has else 0
            col = min(col, C - 1)
            items.append((e, rowStart, tileRows, col, tail, inPairs))
    return items


def check(offs, C, coupled, tails, grouped):
    shift = 1 if coupled else 0
    cover = {}
    per_rank = [walk(offs, C, shift, tails, r, grouped) for r in range(2 if coupled else 1)]
    if coupled:
        assert len(per_rank[0]) == len(per_rank[1])
        for a, b in zip(*per_rank):
            assert a[4] == b[4], "kinds differ in a pair"
            assert a[0] == b[0]
    for items in per_rank:
        for e, rs, tr, col, tail, inPairs in items:
            if tail:
                assert tr <= 64
                wgs = [(0, col), (1, min(col + 1, C - 1))]
                for w, c in wgs:
                    valid = tr > 0 and not (w == 1 and col + 1 >= C)
                    if not valid:
                        continue
                    for r in range(tr):
                        key = (rs + r, c)
                        assert key not in cover, ("dup", key)
                        cover[key] = e
            else:
                for r in range(tr):
                    key = (rs + r, col)
                    assert key not in cover, ("dup", key)
                    cover[key] = e
    for e in range(len(offs) - 1):
        for row in range(offs[e], max(offs[e], offs[e + 1])):
            for c in range(C):
                assert cover.get((row, c)) == e, ("missing", row, c, e)
    n = sum(max(offs[e + 1], offs[e]) - offs[e] for e in range(len(offs) - 1)) * C
    assert len(cover) == n


ap = argparse.ArgumentParser()
ap.add_argument("--trials", type=int, default=3000)
ap.add_argument("--seed", type=int, default=1)
args = ap.parse_args()
random.seed(args.seed)
for trial in range(args.trials):
    E = random.randint(1, 9)
    counts = [
        random.choice(
            [0, 1, 5, 63, 64, 65, 127, 128, 129, 191, 192, 193, 256, 300, random.randint(0, 700)]
        )
        for _ in range(E)
    ]
    offs = [0]
    for c in counts:
        offs.append(offs[-1] + c)
    C = random.randint(1, 9)
    for coupled in (False, True):
        for tails in (False, True):
            for grouped in (False, True):
                check(offs, C, coupled, tails, grouped)
print(f"walk model ok: {args.trials} groupings")

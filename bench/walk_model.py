#!/usr/bin/env python3
"""A model of the Hopper engine's work walk in 2-CTA clusters
(WgmmaKernel::forEachClusterItem, lib/Conversion/MoeToGPU/Gemm/
WgmmaEngine.cpp), checked for coverage: for random expert groupings and
column-tile counts, coupled (2-CTA pairs, odd last row tiles) and not,
every (row, column tile) of every expert is stored by exactly one CTA, and
both CTAs of a pair walk the same experts. It mirrors the C++ rules by hand
(it is not generated from them): update it with the walk. Run:
python3 bench/walk_model.py [--trials N] (CPU only; test/Pipelines/
walk-model.test runs a sample in lit)."""

import argparse
import random


def units_of(rows, C, shift, tileM=128):
    """Units of an expert with `rows` rows: its row-tile pairs (uncoupled:
    its row tiles) x C column tiles, plus ceil(C / 2) units of an odd last
    row tile (each CTA of the pair one column tile)."""
    tiles = -(-rows // tileM)
    pairs, odd = tiles >> shift, tiles & shift
    return pairs * C + odd * ((C + 1) // 2), tiles


def walk(offs, C, shift, rank, tileM=128):
    items = []
    for e in range(len(offs) - 1):
        lo, hi = offs[e], offs[e + 1]
        U, tiles = units_of(max(hi, lo) - lo, C, shift)
        for local in range(U):
            pairs = tiles >> shift
            safe = max(pairs, 1)
            # every column's pairs, then the odd tile's units
            inPairs = local < pairs * C
            pairCol, pair = local // safe, local % safe
            first_col = 0 if inPairs else 2 * (local - pairs * C)
            col = pairCol if inPairs else first_col + rank
            rowTile = ((pair << shift) + rank) if inPairs else max(tiles, 1) - 1
            rowStart = lo + rowTile * tileM
            has = rowStart < hi and col < C
            tileRows = min(hi - rowStart, tileM) if has else 0
            items.append((e, rowStart, tileRows, min(col, C - 1)))
    return items


def check(offs, C, coupled):
    shift = 1 if coupled else 0
    cover = {}
    per_rank = [walk(offs, C, shift, r) for r in range(2 if coupled else 1)]
    if coupled:
        assert len(per_rank[0]) == len(per_rank[1])
        for a, b in zip(*per_rank):
            assert a[0] == b[0], "a pair's CTAs on different experts"
    for items in per_rank:
        for e, rs, tr, col in items:
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
        check(offs, C, coupled)
print(f"walk model ok: {args.trials} groupings")

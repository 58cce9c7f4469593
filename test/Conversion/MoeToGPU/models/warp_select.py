#!/usr/bin/env python3
"""The warp-per-row top-k selection of Routing/WarpSelect.cpp, as a model.

i32 order keys (NaN 1, 0 = not selectable), each lane's best (first of
its largest, entries ascending), the warp's largest key, the lowest entry
holding it, that key cleared. It must pick what selectTopK (Selection.cpp)
picks, k passes each taking the best allowed entry that ranks after the
previous pick under `precedes` (larger value first, -0 == +0, lower index
on ties, NaN below every number and NaNs by index), on every row with at
least k selectable entries (ties, NaN, -0 / +0, inf, invalid entries);
exits 1 on the first difference. The first form of the kernel's
selection, i64 keys orderKey(v) << 32 | ~entry and pick j = the largest
key below pick j - 1's, was modelled here as well until it was removed
(bench/NOTES.md v22). Standard library only (struct, random).
"""

import struct, random


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(f):
    return struct.unpack("<I", struct.pack("<f", f))[0]


def orderKey(v):
    if v != v:
        return 0
    if v == 0.0:
        v = 0.0
    b = bits(v)
    if b & 0x80000000:
        return (~b) & 0xFFFFFFFF
    return b | 0x80000000


def precedes(va, ia, vb, ib):
    """Selection.cpp's precedes: (va, ia) ranks before (vb, ib)."""
    a_nan, b_nan = va != va, vb != vb
    if a_nan:
        return b_nan and ia < ib
    if b_nan:
        return True
    return va > vb or (va == vb and ia < ib)


def select_topk(vals, valid, k):
    """selectTopK: pass j takes the best allowed entry after pick j - 1."""
    prev = -1
    picks = []
    for j in range(k):
        best = -1
        for e in range(len(vals)):
            after = prev < 0 or precedes(vals[prev], prev, vals[e], e)
            beats = best < 0 or precedes(vals[e], e, vals[best], best)
            if after and beats and valid[e]:
                best = e
        picks.append(min(max(best, 0), len(vals) - 1))
        prev = picks[-1]
    return picks


def warp_select(vals, valid, k, R):
    E = len(vals)
    keys = [0] * (32 * R)
    for i in range(32 * R):
        if i < E and valid[i]:
            kk = orderKey(vals[i])
            keys[i] = 1 if kk == 0 else kk
    picks = []
    for j in range(k):
        lk = []
        le = []
        for l in range(32):
            bk, be = 0, 0
            for r in range(R):
                e = l * R + r
                if keys[e] > bk:
                    bk, be = keys[e], e
            lk.append(bk)
            le.append(be)
        m = max(lk)
        offer = [le[l] if lk[l] == m else 0xFFFFFFFF for l in range(32)]
        p = min(offer)
        p = min(max(p, 0), E - 1)
        for e in range(32 * R):
            if e == p:
                keys[e] = 0
        picks.append(p)
    return picks


random.seed(1)
pool = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 0.5, 2.0, 1e-30, -1e-30]
n = 0
for trial in range(3000):
    E = random.choice([8, 16, 33, 64, 100, 128, 256, 257, 512])
    R = (E + 31) // 32
    vals = [
        random.choice(pool) if random.random() < 0.5 else f32(random.gauss(0, 1)) for _ in range(E)
    ]
    valid = [random.random() < 0.95 for _ in range(E)]
    nvalid = sum(valid)
    k = random.randint(1, max(1, min(nvalid, 16)))
    if nvalid < k:
        continue
    a = select_topk(vals, valid, k)
    b = warp_select(vals, valid, k, R)
    assert a == b, (E, k, a, b)
    n += 1
print("ok", n)

#!/usr/bin/env python3
"""The warp-per-row top-k selection of Routing/WarpSelect.cpp, as a model.

warp-select=i64 (the default): i64 keys (orderKey(v) << 32 | ~entry), pick j
= the largest key below pick j - 1's. warp-select=i32: i32 order keys (NaN 1,
0 = not selectable), each lane's best (first of its largest, entries
ascending), the warp's largest key, the lowest entry holding it, that key
cleared. Both must pick the same entries on every row with at least k
selectable entries (ties, NaN, -0 / +0, inf, invalid entries); exits 1 on
the first difference. Standard library only (struct, random).
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


def old_select(vals, valid, k):
    keys = [
        ((orderKey(v) << 32) | ((~i) & 0xFFFFFFFF)) if ok else 0
        for i, (v, ok) in enumerate(zip(vals, valid))
    ]
    prev = (1 << 64) - 1
    picks = []
    for j in range(k):
        best = max([kk for kk in keys if kk < prev] + [0])
        e = (~(best & 0xFFFFFFFF)) & 0xFFFFFFFF
        e = e - (1 << 32) if e >= (1 << 31) else e
        picks.append(min(max(e, 0), len(vals) - 1))
        prev = best
    return picks


def new_select(vals, valid, k, R):
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
    a = old_select(vals, valid, k)
    b = new_select(vals, valid, k, R)
    assert a == b, (E, k, a, b)
    n += 1
print("ok", n)

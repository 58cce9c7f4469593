#!/usr/bin/env python3
"""The one-block route_dispatch sort of Routing/RouteDispatchSmall.cpp
(routeDispatchOneBlock), as a model: 32 warps of 32 slots, in-warp ranks,
per-warp bucket counts, their prefix over the warps, the block scan of the
bucket totals. Must equal a stable sort by bucket (E for ids outside [0,
E)) and its exclusive offsets on random T <= 64, k, E; exits 1 on the first
difference. Standard library only.
"""

import random


def ref(ids, E):
    M = len(ids)
    b = [x if 0 <= x < E else E for x in ids]
    order = sorted(range(M), key=lambda s: (b[s], s))
    rev = [None] * M
    for p, s in enumerate(order):
        rev[p] = s
    offs = [0] * (E + 1)
    for bk in range(E + 1):
        offs[bk] = sum(1 for x in b if x < bk)
    return offs, rev


def model(ids, E):
    M = len(ids)
    nb = E + 1
    W = 32
    bucket = [(ids[s] if 0 <= ids[s] < E else E) if s < M else -1 for s in range(1024)]
    counts = [[0] * nb for _ in range(W)]
    before = [0] * 1024
    total = [0] * 1024
    for t in range(1024):
        w, l = divmod(t, 32)
        for l2 in range(32):
            o = bucket[w * 32 + l2]
            if o == bucket[t]:
                total[t] += 1
                if l > l2:
                    before[t] += 1
    for t in range(1024):
        w = t // 32
        if bucket[t] >= 0 and total[t] == before[t] + 1:
            counts[w][bucket[t]] = total[t]
    tot = [0] * 1024
    for t in range(nb):
        run = 0
        for w in range(W):
            c = counts[w][t]
            counts[w][t] = run
            run += c
        tot[t] = run
    excl = [sum(tot[:t]) for t in range(1024)]
    offs = excl[:nb]
    rev = [None] * M
    for t in range(M):
        w = t // 32
        bk = bucket[t]
        pos = offs[bk] + counts[w][bk] + before[t]
        rev[pos] = t
    return offs, rev


random.seed(3)
for trial in range(300):
    E = random.choice([1, 2, 8, 16, 128, 256])
    T = random.randint(0, 64)
    k = random.choice([1, 2, 4, 8])
    if T * k > 1024:
        continue
    ids = [random.choice([random.randrange(E), -1, E, random.randrange(E)]) for _ in range(T * k)]
    assert model(ids, E) == ref(ids, E), (E, T, k)
print("ok")

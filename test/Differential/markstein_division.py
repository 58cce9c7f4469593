#!/usr/bin/env python3
"""The FP8 epilogue's division, checked exactly.

GEMM1's epilogue (lib/Conversion/MoeToGPU/Gemm/WgmmaEpilogue.cpp) quantizes
h as x / scale without a division per value: y = RN(1 / scale), q = RN(x y),
r = x - q scale (exact in an FMA), RN(q + r y) (one FMA). The CPU pipeline
and the quantization kernel divide (IEEE, round to nearest even); the
codes must be the same bit for bit. This draws bf16 values x and the
scales the layer makes (max(amax, 1e-4) / 448 in f32, or its power of two
with scale_fmt ue8m0) and compares the corrected quotient, every FMA
rounded once (exact rationals), with the f32 division.
"""

import math
import random
import sys
from fractions import Fraction

import numpy as np


def rn32(value):
    """`value` (a Fraction) rounded to the nearest f32, ties to even."""
    if value == 0:
        return np.float32(0.0)
    sign = -1 if value < 0 else 1
    a = abs(value)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    m = a / Fraction(2) ** (e - 23)
    n = math.floor(m)
    rest = m - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    return np.float32(sign * float(n * Fraction(2) ** (e - 23)))


def bf16(v):
    bits = np.array([v], dtype=np.float32).view(np.uint32)[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def main():
    rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 45)
    checked = mismatches = 0
    for _ in range(4000):
        amax = bf16(np.float32(10 ** rng.uniform(-7, 6)))
        scale = np.float32(max(amax, np.float32(1e-4))) / np.float32(448)
        if rng.random() < 0.3:  # ue8m0: the power of two at or above
            scale = np.float32(2.0 ** math.ceil(math.log2(scale)))
        y = np.float32(1) / scale
        for _ in range(8):
            x = bf16(np.float32(amax * rng.uniform(-1, 1)))
            want = np.float32(x) / scale
            q = np.float32(x * y)
            r = rn32(Fraction(float(x)) - Fraction(float(q)) * Fraction(float(scale)))
            got = rn32(Fraction(float(q)) + Fraction(float(r)) * Fraction(float(y)))
            checked += 1
            if got != want:
                mismatches += 1
                print(f"FAIL x={x!r} scale={scale!r} want {want!r} got {got!r}")
    print(f"{checked - mismatches} passed, {mismatches} failed")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())

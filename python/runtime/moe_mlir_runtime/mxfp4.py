"""MXFP4 weights in the order of weight_format mxfp4_hopper.

gpt-oss ships each expert row as 32-value blocks of 16 bytes (value 2j in
the low nibble of byte j, 2j + 1 in the high one). weight_format
``mxfp4_hopper`` stores the same codes of each block in the order the
Hopper kernels' register fragments want them, so that a GPU thread decodes
its values with one 4-byte load and a few shifts and masks:
:func:`repack_mxfp4_hopper` makes that copy once, at load (the E8M0 scales
do not change). Value ``kk`` (0..31) of a block lives in little-endian word
``q = (kk // 2) % 4`` (bytes 4q..4q+3) of the block; with ``p = kk // 8``
and ``h = 16 * (kk % 2)`` its code bits m, e0, e1, s (bit 0..3 of the e2m1
code) sit at word bits ``h + (6, 7, 8, 15) - 3 p`` for p < 3 and
``h + (13, 14, 10, 11)`` for p = 3 (moe.grouped_matmul's reference).
"""

# The word bit of code bit r (m, e0, e1, s) of the values with p = kk // 8
# (low halves; the high ones are 16 above).
POSITIONS = (
    (6, 7, 8, 15),
    (3, 4, 5, 12),
    (0, 1, 2, 9),
    (13, 14, 10, 11),
)


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _repack_rows(b, inverse, zeros):
    """16-byte blocks b (rows of a 2-D integer array / tensor) repacked."""
    if not inverse:
        lo, hi = b & 15, b >> 4
        codes = [lo[:, j // 2] if j % 2 == 0 else hi[:, j // 2] for j in range(32)]
        words = [zeros(b[:, 0]) for _ in range(4)]
        for kk in range(32):
            q, p, h = (kk // 2) % 4, kk // 8, 16 * (kk % 2)
            for r, pos in enumerate(POSITIONS[p]):
                words[q] = words[q] | (((codes[kk] >> r) & 1) << (h + pos))
        return [(words[t // 4] >> (8 * (t % 4))) & 255 for t in range(16)]
    words = [
        b[:, 4 * q] | (b[:, 4 * q + 1] << 8) | (b[:, 4 * q + 2] << 16) | (b[:, 4 * q + 3] << 24)
        for q in range(4)
    ]
    codes = []
    for kk in range(32):
        q, p, h = (kk // 2) % 4, kk // 8, 16 * (kk % 2)
        c = zeros(b[:, 0])
        for r, pos in enumerate(POSITIONS[p]):
            c = c | (((words[q] >> (h + pos)) & 1) << r)
        codes.append(c)
    return [codes[2 * j] | (codes[2 * j + 1] << 4) for j in range(16)]


def repack_mxfp4_hopper(blocks, inverse=False, chunk=1 << 22):
    """The mxfp4_hopper copy of packed MXFP4 codes ``blocks`` (uint8 / int8,
    a numpy array or a torch tensor on any device, last dimension K / 2 or
    the checkpoints' [..., K / 32, 16]; K a multiple of 32), same shape and
    dtype; ``chunk`` blocks at a time. With ``inverse`` the gpt-oss order
    back from an mxfp4_hopper copy."""
    shape = tuple(blocks.shape)
    if not shape or shape[-1] % 16 != 0:
        raise ValueError(
            "expected packed MXFP4 codes with a last dimension a multiple of 16 "
            "(K a multiple of 32), got shape %r" % (shape,)
        )
    if _is_torch(blocks):
        import torch

        flat = blocks.reshape(-1, 16).view(torch.uint8)
        out = torch.empty_like(flat)
        for s in range(0, flat.shape[0], chunk):
            b = flat[s : s + chunk].to(torch.int32)
            out[s : s + chunk] = torch.stack(_repack_rows(b, inverse, torch.zeros_like), dim=1).to(
                torch.uint8
            )
        return out.view(blocks.dtype).reshape(shape)
    import numpy as np

    flat = np.ascontiguousarray(blocks).reshape(-1, 16).view(np.uint8)
    out = np.empty_like(flat)
    for s in range(0, flat.shape[0], chunk):
        b = flat[s : s + chunk].astype(np.uint32)
        out[s : s + chunk] = np.stack(_repack_rows(b, inverse, np.zeros_like), axis=1)
    return out.view(blocks.dtype).reshape(shape)

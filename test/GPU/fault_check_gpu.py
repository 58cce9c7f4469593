#!/usr/bin/env python3
"""GPU faults and concurrency of a compiled layer (issue 14), on the H200:

oom      a call whose temporaries do not fit on the card (Qwen3-30B-A3B
         shape, T = 6,000,000: ~270 GB of intermediates) raises
         RuntimeError naming the failed allocation; the runtime stays
         usable (a T = 64 call afterwards is bitwise equal to one before)
         and the device memory held after freeing the inputs is what it
         was before (cuMemAllocAsync pool trimmed; nothing leaked).
threads  two host threads, each on its own stream, call the same library
         20 times at once with different inputs: every output bitwise
         equal to the same call made alone.
reload   the library loaded, called and unloaded 5 times (a fresh CDLL
         handle each time): device memory in use unchanged.
dirty    the field's "empty experts read uninitialised memory" sequence on
         a dirtied allocator: a T = 4096 call with every expert busy, its
         tensors freed, torch's cached blocks and the runtime's stream-
         ordered pool left holding its data and NaN-filled tensors, then
         T = 64 and T = 300 calls whose tokens all go to 16 of the 128
         experts (the other 112 empty): every output finite and within
         1e-2 of the float32 torch reference.
fault    a CUDA error inside a call that is not an allocation failure: a
         child process calls the library with a logits descriptor pointing
         at an unmapped device address, so the first kernel faults
         (illegal address, a sticky error that ends the CUDA context by
         CUDA's design). The child must raise RuntimeError naming the
         error (at the call or at synchronize), raise again on the next
         call instead of returning output, and exit normally (no abort or
         signal); a fresh process then runs the library correctly.

  python3 test/GPU/fault_check_gpu.py [ART_DIR]     (default gpu-artifacts)
"""

import json
import os
import subprocess
import sys
import threading

ART = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "gpu-artifacts")
sys.path.insert(0, ART)

import torch  # noqa: E402

import moe_mlir_runtime as rt  # noqa: E402
import torch_reference as ref  # noqa: E402

H, E, I2, I = 2048, 128, 1536, 768  # ffn_qwen3_30b_a3b (test/GPU/cases)
LIB = os.path.join(ART, "ffn_qwen3_30b_a3b.fused.so")
failures = 0


def report(ok, what):
    global failures
    failures += not ok
    print("%s %s" % ("PASS" if ok else "FAIL", what), flush=True)


def used():
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free


def main():
    g = torch.Generator(device="cuda").manual_seed(5)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(torch.bfloat16)

    w_up, w_down = randn(E, I2, H, scale=0.02), randn(E, H, I, scale=0.02)
    lib = rt.Library(LIB)

    def call(x, logits, stream=None):
        out = torch.full((x.shape[0], H), float("nan"), device="cuda", dtype=torch.bfloat16)
        lib.call("ffn", x, logits, w_up, w_down, out, stream=stream)
        return out

    # -- oom ------------------------------------------------------------------
    x64, l64 = randn(64, H), randn(64, E)
    before = call(x64, l64)
    torch.cuda.synchronize()
    base = used()
    T = 6_000_000
    big_x = torch.zeros(T, H, device="cuda", dtype=torch.bfloat16)
    big_l = torch.zeros(T, E, device="cuda", dtype=torch.bfloat16)
    big_out = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
    try:
        lib.call("ffn", big_x, big_l, w_up, w_down, big_out)
        torch.cuda.synchronize()
        message = None
    except RuntimeError as e:
        message = str(e)
    report(message is not None, "oom: the call raised: %s" % (message or "nothing")[:300])
    del big_x, big_l, big_out
    torch.cuda.empty_cache()
    try:
        lib.synchronize()
        sync_ok = True
    except RuntimeError as e:
        sync_ok = False
        print("  synchronize after the failure: %s" % e)
    after = call(x64, l64)
    torch.cuda.synchronize()
    report(sync_ok and torch.equal(before, after), "oom: usable afterwards, output bitwise equal")
    leaked = used() - base
    report(abs(leaked) < 256 << 20, "oom: device memory in use %+d MiB" % (leaked >> 20))

    # -- threads --------------------------------------------------------------
    inputs = [(randn(t, H), randn(t, E)) for t in (37, 300, 1024, 5)]
    alone = [call(x, lg) for x, lg in inputs]
    torch.cuda.synchronize()
    results = {}

    def worker(w):
        stream = torch.cuda.Stream()
        outs = []
        with torch.cuda.stream(stream):
            for i in range(20):
                x, lg = inputs[(i + w) % len(inputs)]
                outs.append(((i + w) % len(inputs), call(x, lg, stream=stream)))
        stream.synchronize()
        results[w] = outs

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    same = all(torch.equal(o, alone[j]) for outs in results.values() for j, o in outs)
    report(len(results) == 2 and same, "threads: 2 x 20 concurrent calls bitwise equal to alone")

    # -- reload ---------------------------------------------------------------
    lib.unload()
    base = used()
    ok = True
    for _ in range(5):
        lib = rt.Library(LIB)
        out = call(x64, l64)
        torch.cuda.synchronize()
        ok &= torch.equal(out, before)
        lib.unload()
        del lib, out
    torch.cuda.empty_cache()
    grown = used() - base
    report(ok and abs(grown) < 64 << 20, "reload: 5 cycles, outputs equal, %+d MiB" % (grown >> 20))

    # -- dirty ----------------------------------------------------------------
    lib = rt.Library(LIB)
    busy_x, busy_l = randn(4096, H), randn(4096, E)
    busy = call(busy_x, busy_l)
    torch.cuda.synchronize()
    busy_ok = bool(torch.isfinite(busy).all())
    del busy, busy_x, busy_l
    junk = [torch.full((1 << 26,), float("nan"), device="cuda") for _ in range(4)]
    del junk  # torch's cache now holds NaN-filled blocks
    for t in (64, 300):
        x = randn(t, H)
        logits = randn(t, E)
        logits[:, 16:] = -30.0  # experts 16..127 get no token
        y = call(x, logits).float()
        torch.cuda.synchronize()
        want, rr = ref.ffn(
            x,
            logits,
            w_up,
            w_down,
            k=8,
            scoring="softmax",
            normalize=True,
            layout="concat",
            transpose_weights=True,
        )
        used_experts = int(torch.unique(rr.ids).numel())
        err = float((y - want).norm() / want.norm())
        finite = bool(torch.isfinite(y).all())
        report(
            busy_ok and finite and err <= 1e-2 and used_experts <= 16,
            "dirty: T=%d after a busy call, %d experts used, finite %s, rel err %.2e"
            % (t, used_experts, finite, err),
        )
    lib.unload()

    # -- fault ----------------------------------------------------------------
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), ART, "--fault-child"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [l for l in child.stdout.splitlines() if l.startswith("{")]
    result = json.loads(lines[-1]) if lines else {}
    first, again = result.get("first"), result.get("again")
    report(
        child.returncode == 0 and bool(first) and "illegal" in first.lower() and bool(again),
        "fault: child exit %d, raised %r, next call raised %r"
        % (child.returncode, (first or "nothing")[:160], (again or "nothing")[:120]),
    )
    if child.returncode != 0:
        print(child.stderr[-2000:])
    after = rt.Library(LIB)
    out = torch.full((64, H), float("nan"), device="cuda", dtype=torch.bfloat16)
    after.call("ffn", x64, l64, w_up, w_down, out)
    torch.cuda.synchronize()
    report(torch.equal(out, before), "fault: this process (a fresh context) still correct")
    print("fault_check_gpu: %d failure(s)" % failures)
    return 1 if failures else 0


def fault_child():
    """Calls the library with logits at an unmapped device address; prints
    {"first": error of that call, "again": error of the next call}."""
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(64, H, device="cuda", generator=g).to(torch.bfloat16)
    logits = torch.randn(64, E, device="cuda", generator=g).to(torch.bfloat16)
    w_up = torch.zeros(E, I2, H, device="cuda", dtype=torch.bfloat16)
    w_down = torch.zeros(E, H, I, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(64, H, device="cuda", dtype=torch.bfloat16)
    lib = rt.Library(LIB)
    bad = rt.memref_descriptor(logits)
    bad.allocated = bad.aligned = 1 << 47  # no allocation lives there
    result = {}
    for key, args in (
        ("first", (x, bad, w_up, w_down, out)),
        ("again", (x, logits, w_up, w_down, out)),
    ):
        try:
            lib.call("ffn", *args)
            lib.synchronize()
            result[key] = None
        except RuntimeError as e:
            result[key] = str(e)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(fault_child() if "--fault-child" in sys.argv else main())

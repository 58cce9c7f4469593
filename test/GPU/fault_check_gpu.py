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

  python3 test/GPU/fault_check_gpu.py [ART_DIR]     (default gpu-artifacts)
"""

import os
import sys
import threading

ART = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "gpu-artifacts")
sys.path.insert(0, ART)

import torch  # noqa: E402

import moe_mlir_runtime as rt  # noqa: E402

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
    print("fault_check_gpu: %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

//===- Passes.td - moe conversion passes -------------------*- tablegen -*-===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_MLIR_CONVERSION_PASSES_TD
#define MOE_MLIR_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoeToLinalgPass : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower every moe op to linalg / scf / tensor / arith / math";
  let description = [{
    The executable semantics of the `moe` dialect: every op (and `moe.ffn`,
    through the `--moe-decompose` patterns) becomes upstream tensor-level
    IR that one-shot bufferization and the usual LLVM lowering handle. The
    lowering follows the op reference to the letter, including the run-time rules
    (NaN ranking, non-finite routing logits, ids out of range, empty
    experts, T = 0); every data-dependent access is bounds-guarded.

    Strategy by family:
    - routing (`topk`, `route`): per-row `scf.for` selection passes over the
      total order "larger first, lower index on ties, NaN last";
    - dispatch (`cumsum`, `get_indices`, `get_indptr`): sequential loops,
      O(E*T + T*k*k);
    - movement: `gather` and `combine` as `linalg.generic` (combine reduces
      the slot dim in f32, in slot order), `scatter` and the multi-hot
      converters as ordered loops;
    - expert compute: `grouped_matmul` as a loop over experts with a
      dynamic-size `linalg.generic` contraction per expert, `glu` as one
      `linalg.generic` reading the gate and up views.

    Example:

    ```mlir
    %rows = moe.gather %x[%tok] : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
    ```

    becomes a `linalg.generic` over `(m, h)` whose body reads
    `%x[%tok[m], h]` under an `scf.if` on `0 <= %tok[m] < T` and yields 0
    otherwise.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertMoeToGPUPass : Pass<"convert-moe-to-gpu"> {
  let summary = "Lower every moe op to gpu.launch kernels over buffers";
  let description = [{
    The GPU form of the `moe` dialect. Each moe op (and `moe.ffn`, through
    the `--moe-decompose` patterns; `moe.grouped_matmul` through
    `moe.expert_gemm`; `moe.route_dispatch` through route + dispatch)
    becomes `gpu.launch` kernels whose bodies use `memref.load` /
    `memref.store`, bridged to the surrounding tensor IR by
    `bufferization.to_buffer` (read-only operands) and
    `bufferization.to_tensor restrict writable` (fresh results), so one-shot
    bufferization handles the rest of the module. Index arithmetic is
    `index` (64-bit on the device), so offsets past 2^31 are safe.

    Kernels:
    - `expert_gemm`: built by the GEMM emitter from a kernel configuration
      (options `gemm`, `chip`, `wgmma-*`): on sm_90a for 16-bit operands the
      Hopper engine (warp-specialised, TMA weights, cp.async gathered rows,
      mbarrier pipeline, wgmma, persistent grid over the ragged tiles; built
      for 2-CTA clusters, `wgmma-cluster`: when the experts average at least
      one row tile the host launches it in clusters whose two CTAs share
      each weight tile by TMA multicast, else without clusters; fp8_block
      weights are not clustered by default) under
      a run-time layout guard, else (and as the guard's fallback) the SIMT
      engine (tile-m x tile-n per block, 4 x 4 outputs per thread, f32
      accumulation); both with the gather prologue, bias + GLU + row-scale
      epilogue and scatter store, experts found from the offsets on the
      device;
    - routing (`topk`, `route`): one warp per token row (scores in lane
      registers, warp-wide argmax per pick, ties to the lower index);
    - dispatch metadata: `moe.dispatch` as three kernels (per-chunk ranks
      and histograms, per-expert scan, placement), bitwise the ordered
      counting sort; per-row kernels plus one-block ordered passes for
      `moe.cumsum`;
    - movement (`gather`, `glu`, `scatter`): one thread per element,
      coalesced along rows; `combine`: one thread per 16 bytes of a row
      (16-byte loads and stores where the layouts allow, checked on the
      host; the k slots summed in order in f32); `scatter` resolves duplicate
      destinations with an atomic-max owner map (later row wins,
      deterministically).

    Example:

    ```mlir
    %rows = moe.gather %x[%tok] : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
    ```

    becomes a `gpu.launch` with one block per row and 256-thread column
    blocks, reading `%x[%tok[m], h]` when `0 <= %tok[m] < T` and writing 0
    otherwise.

    Every option below is also an option of `--moe-lower-to-nvvm`, which
    hands the options it does not take itself to this pass (they are
    declared here only). The defaults are the cost model's choices; the
    `wgmma-*` overrides are for tuning and for tests.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"64",
           "Rows of the expert GEMM's block tile (multiple of 4)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"64",
           "Columns of the expert GEMM's block tile (multiple of 4)">,
    Option<"tileK", "tile-k", "int64_t", /*default=*/"16",
           "K step of the expert GEMM through shared memory">,
    Option<"gemm", "gemm", "std::string", /*default=*/"\"auto\"",
           "Expert GEMM engine: auto (cost model: wgmma on sm_90a where the "
           "op allows it, else simt), simt (portable f32 FMA), wgmma "
           "(Hopper tensor cores; an op it cannot run is an error). "
           "moe.grouped_matmul_wgrad takes the Hopper kernel on sm_90a "
           "unless simt (16-bit operands, K and N multiples of 64; else "
           "the portable kernel, whatever this option says)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "Target chip (selects the GEMM engines available)">,
    Option<"wgmmaTileM", "wgmma-tile-m", "int64_t", /*default=*/"0",
           "Hopper GEMM rows per block: 64 or 128 (0: cost model; mxfp4 "
           "weights: fixed tiles, not applied)">,
    Option<"wgmmaTileN", "wgmma-tile-n", "int64_t", /*default=*/"0",
           "Hopper GEMM rhs columns per block: a multiple of 16 in [64, 256] "
           "(64, 128 or 256 for [E, K, N] weights, a multiple of 32 with a "
           "concat GLU, 128 or 256 for fp8_block weights, 256 only when each "
           "128-column half is one scale block; 0: cost model; mxfp4 "
           "weights: fixed tiles, not applied)">,
    Option<"wgmmaStages", "wgmma-stages", "int64_t", /*default=*/"0",
           "Hopper GEMM pipeline stages, 2..8 (0: as many as fit)">,
    Option<"wgmmaTma", "wgmma-tma", "bool", /*default=*/"true",
           "Hopper GEMM: weight tiles by TMA (tensor maps from the runtime's "
           "moeRuntimeTensorMap3D); false: by cp.async (mxfp4 weights: "
           "the SIMT kernel)">,
    Option<"wgmmaCluster", "wgmma-cluster", "int64_t", /*default=*/"0",
           "Hopper GEMM CTAs per cluster: 1, or 2 (pairs of row tiles of "
           "one expert share each weight tile, multicast by TMA; needs "
           "wgmma-tma and tile-n >= 128); 0: cost model (2 where it "
           "can, but 1 for fp8_block weights)">,
    Option<"wgmmaSwapRows", "wgmma-swap-rows", "int64_t", /*default=*/"-1",
           "Hopper small-M (swap-AB) GEMM kernel: weights on the wgmma M "
           "side, tokens on N; the host launches it instead of the kernel "
           "above when the rows average at most this many per expert "
           "(-1: cost model, 0: never; K-major weights by TMA only)">,
    Option<"wgmmaSwapTileM", "wgmma-swap-tile-m", "int64_t",
           /*default=*/"0",
           "Small-M kernel tokens per tile (the wgmma N): 16, 32 or 64 "
           "(0: cost model)">,
    Option<"wgmmaSwapMnMajor", "wgmma-swap-mn-major", "bool",
           /*default=*/"true",
           "Small-M kernel also for MN-major weights ([E, K, N]; the "
           "weights are wgmma's transposed A operand; not with a concat "
           "GLU); by default up to 1 row per expert (wgmma-swap-rows sets "
           "both thresholds)">,
    Option<"wgmmaWideSwapRows", "wgmma-wide-swap-rows", "int64_t",
           /*default=*/"-1",
           "A second small-M kernel with wider token tiles "
           "(wgmma-wide-swap-tile-m), launched when the rows average more "
           "than wgmma-swap-rows and at most this many per expert (-1: cost "
           "model, 32; 0: none); at 16-32 rows per expert it was 1.6-4.4% "
           "faster than the main kernel with K-major weights, 5-11% with "
           "MN-major ones (bench/NOTES.md v40, v47)">,
    Option<"wgmmaWideSwapTileM", "wgmma-wide-swap-tile-m", "int64_t",
           /*default=*/"32",
           "Tokens per tile of the wide small-M kernel: 32 or 64">,
    Option<"wgmmaProducerRegisters", "wgmma-producer-registers", "int64_t",
           /*default=*/"0",
           "Main Hopper kernel: registers per thread the producer "
           "warpgroup keeps after setmaxnreg, a multiple of 8 in [24, "
           "160]; the two consumer warpgroups take what it gives up (168 "
           "+ (168 - P) / 2, at most 256, rounded down to 8). 0: cost "
           "model (56, the consumers 224; 104 / 200 with the weights by "
           "cp.async). Kernels whose "
           "accumulators fit the registers at entry move none">,
    Option<"wgmmaSwapTileN", "wgmma-swap-tile-n", "int64_t",
           /*default=*/"0",
           "Small-M kernel weight rows per block: 64 or 128 (0: cost model)">,
    Option<"elideFills", "elide-fills", "bool", /*default=*/"true",
           "Expert GEMMs zero only the output rows that can be read: none "
           "when the result feeds only expert GEMMs over the same offsets "
           "(as their lhs, without a gather), and through a dispatch's "
           "reverse_indices (a permutation) only the targets of the rows no "
           "expert owns; false: every output is zero-filled first">,
    Option<"programmaticLaunch", "programmatic-launch", "bool",
           /*default=*/"true",
           "Hopper GEMM kernels wait for their predecessor on the device "
           "(griddepcontrol.wait before any global access) so that the "
           "runtime can launch them while it finishes (programmatic "
           "dependent launch, see moe-gpu-programmatic-launch); they and "
           "the few-row route + dispatch kernel let their successor start "
           "early">,
    Option<"routeDispatchSmall", "route-dispatch-small", "bool",
           /*default=*/"true",
           "moe.route_dispatch with at most 64 rows (k <= 32, E <= 256) as "
           "one kernel, a cluster of up to 8 blocks that route 8 rows each "
           "and meet in distributed shared memory for the dispatch sort, "
           "chosen on the host at run time; more rows keep the route "
           "kernel and the dispatch kernels (sm_90 and later: older "
           "chips always keep them)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def MoeGpuDeviceMemoryPass : Pass<"moe-gpu-device-memory"> {
  let summary = "Put host-side buffers of a bufferized GPU module in device memory";
  let description = [{
    After bufferization, the buffers that kernels read and write are host
    `memref.alloc`s. This pass moves them to the device: outside of GPU
    kernels, `memref.alloc` becomes `gpu.alloc`, `memref.dealloc` becomes
    `gpu.dealloc` and `memref.copy` between identity-layout buffers becomes
    `gpu.memcpy`. A `memref.copy` with a non-identity layout is reported as
    an error rather than left to fault on the device.

    Host constants read outside kernels (`memref.get_global` of a constant
    `memref.global`: weights given as `dense` or `dense_resource` tensor
    constants after bufferization) become device buffers that the compiled
    library uploads once, when it is loaded, and frees when it is unloaded:
    the bytes move into an internal LLVM global, a global constructor calls
    `moeRuntimeUploadConstant` and stores the device pointer in a slot, a
    global destructor frees it (`moeRuntimeFreeConstant`), and every
    `memref.get_global` becomes a memref of the slot's pointer. Calls copy
    nothing and stay CUDA-graph capturable. A resource whose data was
    elided (`dense_resource<__elided__>`) is uploaded as zeros, with a
    warning. Mutable or uninitialised host globals, and constants of more
    than 1.75 GiB in all (beyond what the library's data can hold), are
    reported as errors.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect"];
}

def MoeGpuAlignWorkgroupMemoryPass
    : Pass<"moe-gpu-align-workgroup-memory", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Give every workgroup attribution of a kernel an explicit alignment";
  let description = [{
    Sets `llvm.align` on every workgroup attribution of the `gpu.func`s of a
    `gpu.module` that has none (or a smaller one), so that
    `convert-gpu-to-nvvm` emits the shared-memory global with that
    alignment.

    Without it the global has no explicit alignment: LLVM's optimiser then
    assumes the data layout's preferred alignment (16 bytes for arrays of
    16 bytes or more) and may vectorise a loop over the buffer into
    `ld.shared.v4`, while the NVPTX back end declares the demoted variable
    with the element's alignment (`.shared .align 4`) and ptxas may place
    it at 4 mod 16: a misaligned-address fault on the device (seen on the
    H200 for a loop summing 32 `i32` warp totals).

    ```mlir
    gpu.func @k() workgroup(%w : memref<32xi32, #gpu.address_space<workgroup>>) kernel
    // becomes
    gpu.func @k() workgroup(%w : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"16",
           "alignment in bytes (a power of two)">,
  ];
}

def MoeGpuProgrammaticLaunchPass
    : Pass<"moe-gpu-programmatic-launch", "::mlir::ModuleOp"> {
  let summary = "Mark kernels that wait for their predecessor on the device";
  let description = [{
    Renames every kernel (`gpu.func` with `gpu.kernel`) that contains an
    `nvvm.griddepcontrol wait` to `<name>__pdl` and updates the
    `gpu.launch_func` ops that launch it. moe-mlir's CUDA runtime launches
    kernels with that suffix with programmatic stream serialization
    (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`, "PDL"): the
    kernel may start while the previous kernel on the stream still runs
    (once each of its blocks has executed `griddepcontrol.launch_dependents`
    or exited), and its `griddepcontrol.wait` holds it until that kernel
    has completed and its memory is visible. A kernel so marked must wait
    before it touches global memory; kernels without a wait keep the plain
    launch (they start after their predecessor has completed).

    ```mlir
    gpu.module @m {
      gpu.func @k() kernel { nvvm.griddepcontrol wait ... }
    }
    gpu.launch_func @m::@k ...
    // becomes
    gpu.module @m {
      gpu.func @k__pdl() kernel { nvvm.griddepcontrol wait ... }
    }
    gpu.launch_func @m::@k__pdl ...
    ```
  }];
}

def MoeGpuRegisterBudgetPass
    : Pass<"moe-gpu-register-budget", "::mlir::ModuleOp"> {
  let summary = "Blocks per SM for kernels that move registers with "
                "setmaxnreg";
  let description = [{
    A kernel (`gpu.func` with `gpu.kernel` and a known block size of T
    threads, 128 a warpgroup) in which one warpgroup lowers its registers
    to P (`nvvm.setmaxregister decrease`) and the others raise theirs to C
    (`increase`) needs E = (P + n C) / (1 + n) registers a thread at entry
    (n = T / 128 - 1, rounded up to 8): ptxas takes its count at entry from
    the blocks per SM it is told, so the pass sets `nvvm.minctasm` to
    65536 / (T E) where that is 2 or more (one block per SM is ptxas's
    default; such kernels are left alone). moe-mlir's Hopper kernels plan
    their register budgets with it: three blocks per SM of 256 threads
    enter with 80 registers, a producer at 48 and a consumer at 112.

    ```mlir
    gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      nvvm.setmaxregister decrease 40  // producer
      nvvm.setmaxregister increase 120 // consumer
    }
    // gets {nvvm.minctasm = 3 : i32}
    ```
  }];
}

def MoeForwardOutParamsPass : Pass<"moe-forward-out-params",
                                    "::mlir::func::FuncOp"> {
  let summary = "Write results straight into out-parameter buffers";
  let description = [{
    After `buffer-results-to-out-params`, a result computed into a fresh
    buffer is copied into its out-parameter at the end of the function:

    ```mlir
    %r = memref.alloc(%n) : memref<?x64xbf16>
    gpu.launch ... { ... memref.store %v, %r[...] ... }
    memref.copy %r, %out : memref<?x64xbf16> to memref<?x64xbf16>
    return
    ```

    When the copy's source is a `memref.alloc` of the same type in the same
    block, the out-parameter has no other use, and nothing uses the
    allocation after the copy, the allocation is replaced by the
    out-parameter and the copy is dropped: the kernels write the caller's
    buffer directly (no copy kernel, no extra allocation). The caller's
    buffer must then have the result's shape, which the calling convention
    requires anyway.
  }];
}

def MoeGpuModuleToBinaryPass : Pass<"moe-gpu-module-to-binary",
                                     "::mlir::ModuleOp"> {
  let summary = "gpu-module-to-binary, with the modules compiled in parallel";
  let description = [{
    Does what upstream `gpu-module-to-binary` does (every `gpu.module`
    becomes a `gpu.binary` through its target attributes: NVVM -> PTX ->
    ptxas), but compiles the modules on the context's thread pool: each
    module goes into its own detached container, the containers are handed
    out largest first (by operation count) to the first free thread, and
    the binaries are moved back where the modules were. Compiled one after
    the other, a layer's kernels would spend most of its compile time
    waiting for ptxas one kernel at a time. Without multithreading it is
    the upstream transformation.

    With `modules=N` (default 2; 0 keeps them apart) the modules are first
    merged into at most N per set of module attributes (targets, offloading
    handler): largest first, each into the group with the fewest operations
    so far. Every module costs a fixed set-up in LLVM and a ptxas process;
    N does not depend on the machine, so the binaries do not either. 2
    keeps two cores busy with the 13-15 kernels of a layer and compiled
    three of the four model layers 0.2-0.3 s faster than 4 on a 2-core
    machine (bench/NOTES.md, "Compile time", twenty-sixth session). A group
    keeps the name of its largest module; a kernel is renamed after the
    module it came from (`<module>` for a module's only kernel, else
    `<module>_<kernel>`, with the `__pdl` suffix kept) and the
    `gpu.launch_func` ops follow; symbols that clash are renamed,
    identical external declarations shared. Each kernel's code is the same
    as when it is compiled alone.
  }];
  let options = [
    Option<"toolkitPath", "toolkit", "std::string", /*default=*/"\"\"",
           "CUDA toolkit root">,
    Option<"compilationTarget", "format", "std::string",
           /*default=*/"\"fatbin\"",
           "offload, assembly (isa), bin or fatbin, as gpu-module-to-binary">,
    Option<"modules", "modules", "unsigned", /*default=*/"2",
           "merge the gpu.modules into at most this many per set of module "
           "attributes first (kernels renamed after their modules); 0 keeps "
           "them apart">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoeOrderConstantGlobalsPass
    : Pass<"moe-order-constant-globals", "::mlir::ModuleOp"> {
  let summary = "Name and order bufferization's constant globals by first use";
  let description = [{
    One-shot bufferization turns each tensor constant into a private
    constant `memref.global` named `__constant_<shape><type>` (`_0`, `_1`,
    ... on a clash), but which function's constant it meets first varies
    from run to run (MLIR 22; also without threading), so the names, the
    globals' order and everything built from them (the device copies of
    moe-gpu-device-memory) change between runs of the same input. This pass
    makes them a function of the module: the `__constant_` globals are
    renamed in the order of their first `memref.get_global` in the module
    (walked in order; unused ones last, by their current order), the first
    of a base name keeping the base and the later ones `_0`, `_1`, ..., and
    moved, in that order, to where the first of them stood. Other symbols
    are not touched; a name that another symbol already holds is skipped.

    ```mlir
    memref.global "private" constant @__constant_2xf32_0 : memref<2xf32> = dense<[1.0, 2.0]>
    memref.global "private" constant @__constant_2xf32 : memref<2xf32> = dense<[3.0, 4.0]>
    func.func @f() { %a = memref.get_global @__constant_2xf32_0 ... }
    func.func @g() { %b = memref.get_global @__constant_2xf32 ... }
    // becomes
    memref.global "private" constant @__constant_2xf32 ... dense<[1.0, 2.0]>
    memref.global "private" constant @__constant_2xf32_0 ... dense<[3.0, 4.0]>
    (@f uses @__constant_2xf32, @g uses @__constant_2xf32_0)
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def MoeEmitCInterfacePass : Pass<"moe-emit-c-interface", "::mlir::ModuleOp"> {
  let summary = "Mark public functions for C-callable wrappers";
  let description = [{
    Adds `llvm.emit_c_interface` to every public `func.func` with a body,
    so the LLVM lowering emits `_mlir_ciface_<name>` wrappers that take
    pointers to memref descriptors: the entry points of the ahead-of-time
    libraries (`moe-aot`) and of embedders.

    Upstream's `llvm-request-c-wrappers` marks every `func.func`, private
    declarations included; the lowering would then call the runtime's
    entry points (`moeRuntimeTensorMap3D`, the `mgpu*` functions, declared
    privately in the module) through `_mlir_ciface_` wrappers that the
    runtime does not define, and the library would not link. Hence this
    pass: public definitions only.
  }];
}

def MoeGpuLaunchReportPass
    : Pass<"moe-gpu-launch-report", "::mlir::ModuleOp"> {
  let summary = "Print the kernel launches of each host function";
  let description = [{
    An analysis that changes nothing. For every host function whose control
    flow is still structured (`scf`: after `--convert-moe-to-gpu`, counting
    `gpu.launch`, or after kernel outlining, `gpu.launch_func`) it prints to stderr how many kernel launch sites the
    function has and how many launches one call makes, the fewest and the
    most over the branches the lowering chose between on the host (`scf.if`:
    engine guards, the few-row paths); a launch inside a loop makes the most
    unbounded. This is what the GPU backend really launches, where
    `--moe-cost-report` counts the tensor-level ops.

    ```
    moe-opt layer.mlir --moe-decompose --moe-fuse --convert-moe-to-gpu \
        --moe-gpu-launch-report=label=fused
    moe-gpu-launch-report [fused] @ffn: 12 launch sites, 4 to 8 launches per call
    ```
  }];
  let options = [
    Option<"label", "label", "std::string", /*default=*/"\"\"",
           "A tag printed with each report">,
  ];
}

#endif // MOE_MLIR_CONVERSION_PASSES_TD

// Bad --moe-lower-to-nvvm options are rejected when the pipeline is parsed,
// with the reason, before anything runs.
// RUN: not moe-opt %s --moe-lower-to-nvvm=format=bogus 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not moe-opt %s --moe-lower-to-nvvm=chip=gfx90a 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not moe-opt %s --moe-lower-to-nvvm=opt-level=7 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not moe-opt %s --moe-lower-to-nvvm=tile-m=30 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not moe-opt %s "--moe-lower-to-nvvm=tile-m=256 tile-n=256" 2>&1 | FileCheck %s --check-prefix=THREADS
// RUN: not moe-opt %s --moe-lower-to-nvvm=tile-k=64 "--moe-lower-to-nvvm=tile-m=128 tile-n=128 tile-k=64" 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not moe-opt %s --moe-lower-to-nvvm=shape-checks=maybe 2>&1 | FileCheck %s --check-prefix=CHECKS
// RUN: not moe-opt %s --moe-lower-to-cpu=shape-checks=maybe 2>&1 | FileCheck %s --check-prefix=CPUCHECKS

// FORMAT: error: moe-lower-to-nvvm: format must be one of cubin, ptx, fatbin, llvm (got 'bogus')
// CHIP: error: moe-lower-to-nvvm: chip must name an SM architecture such as sm_90a (got 'gfx90a')
// OPT: error: moe-lower-to-nvvm: opt-level must be in [0, 3]
// TILE: error: moe-lower-to-nvvm: GEMM tile-m and tile-n must be multiples of 4
// THREADS: error: moe-lower-to-nvvm: GEMM tile gives 4096 threads per block
// CHECKS: error: moe-lower-to-nvvm: shape-checks must be one of report, abort, none (got 'maybe')
// CPUCHECKS: error: moe-emit-shape-checks: mode must be report or abort, got 'maybe'
// SMEM: error: moe-lower-to-nvvm: GEMM tile needs {{[0-9]+}} bytes of shared memory (more than 48 KiB)

func.func @f(%x: tensor<?x8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %v, %i = moe.topk %x k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

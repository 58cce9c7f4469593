// RUN: moe-opt %s --moe-gpu-register-budget | FileCheck %s

// A kernel of 256 threads whose producer warpgroup lowers its registers to
// 48 and whose consumer raises them to 112 needs 80 at entry: three blocks
// per SM; 48 / 80 needs 64: four blocks. The main kernel's budget (384 threads, 56 / 224: 168 at entry)
// is one block per SM and gets nothing; nor do kernels without setmaxnreg
// or without a known block size.

module attributes {gpu.container_module} {
  gpu.module @m {
    // CHECK-LABEL: gpu.func @small_m
    // CHECK-SAME: nvvm.minctasm = 3 : i32
    gpu.func @small_m() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      nvvm.setmaxregister decrease 48
      nvvm.setmaxregister increase 112
      gpu.return
    }
    // CHECK-LABEL: gpu.func @small_m_four
    // CHECK-SAME: nvvm.minctasm = 4 : i32
    gpu.func @small_m_four() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      nvvm.setmaxregister decrease 48
      nvvm.setmaxregister increase 80
      gpu.return
    }
    // CHECK-LABEL: gpu.func @main_kernel
    // CHECK-NOT: nvvm.minctasm
    gpu.func @main_kernel() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
      nvvm.setmaxregister decrease 56
      nvvm.setmaxregister increase 224
      gpu.return
    }
    // CHECK-LABEL: gpu.func @no_split
    // CHECK-NOT: nvvm.minctasm
    gpu.func @no_split() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      gpu.return
    }
    // CHECK-LABEL: gpu.func @unknown_block
    // CHECK-NOT: nvvm.minctasm
    gpu.func @unknown_block() kernel {
      nvvm.setmaxregister decrease 48
      nvvm.setmaxregister increase 112
      gpu.return
    }
  }
}

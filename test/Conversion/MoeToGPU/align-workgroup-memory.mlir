// RUN: moe-opt %s \
// RUN:   --pass-pipeline='builtin.module(gpu.module(moe-gpu-align-workgroup-memory))' \
// RUN:   | FileCheck %s
// RUN: moe-opt %s \
// RUN:   --pass-pipeline='builtin.module(gpu.module(moe-gpu-align-workgroup-memory))' \
// RUN:   | mlir-opt --convert-gpu-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: moe-opt %s \
// RUN:   --pass-pipeline='builtin.module(gpu.module(moe-gpu-align-workgroup-memory{alignment=32}))' \
// RUN:   | FileCheck %s --check-prefix=A32
// RUN: not moe-opt %s \
// RUN:   --pass-pipeline='builtin.module(gpu.module(moe-gpu-align-workgroup-memory{alignment=12}))' \
// RUN:   2>&1 | FileCheck %s --check-prefix=BAD

// Every workgroup attribution gets llvm.align = 16 unless it already has
// at least that; private attributions and arguments are left alone.

// CHECK-LABEL: gpu.func @k
// CHECK-SAME: workgroup(%{{[a-z0-9_]+}} : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{[a-z0-9_]+}} : memref<7xi8, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{[a-z0-9_]+}} : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
// CHECK-SAME: private(%{{[a-z0-9_]+}} : memref<4xf32, #gpu.address_space<private>>)
// NVVM-DAG: llvm.mlir.global internal @__wg_k_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<32 x i32>
// NVVM-DAG: llvm.mlir.global internal @__wg_k_1() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<7 x i8>
// NVVM-DAG: llvm.mlir.global internal @__wg_k_2() {addr_space = 3 : i32, alignment = 64 : i64} : !llvm.array<4 x f32>
// A32: workgroup(%{{[a-z0-9_]+}} : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 32 : i64}, %{{[a-z0-9_]+}} : memref<7xi8, #gpu.address_space<workgroup>> {llvm.align = 32 : i64}, %{{[a-z0-9_]+}} : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
// BAD: error: moe-gpu-align-workgroup-memory: alignment must be a power of two (got 12)
gpu.module @m {
  gpu.func @k(%out: memref<4xi32>)
      workgroup(%w : memref<32xi32, #gpu.address_space<workgroup>>,
                %b : memref<7xi8, #gpu.address_space<workgroup>>,
                %f : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
      private(%p : memref<4xf32, #gpu.address_space<private>>) kernel {
    %c0 = arith.constant 0 : index
    %v = memref.load %w[%c0] : memref<32xi32, #gpu.address_space<workgroup>>
    memref.store %v, %out[%c0] : memref<4xi32>
    gpu.return
  }
}

// RUN: moe-opt %s --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-gpu="tile-m=64 tile-n=64 tile-k=32" | FileCheck %s --check-prefix=K32

// Regression: the expert GEMM's outer K loop must advance by tile-k (each
// iteration stages and accumulates the whole K slice [k0, k0 + tile-k)).

// The K loop (16 f32 accumulators) must step by tile-k.
// CHECK-LABEL: func.func @grouped_matmul_k64(
// CHECK: workgroup(
// CHECK: scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c64{{(_[0-9]+)?}} step %c16{{(_[0-9]+)?}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: gpu.barrier

// K32-LABEL: func.func @grouped_matmul_k64(
// K32: workgroup(
// K32: scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %c64{{(_[0-9]+)?}} step %c32{{(_[0-9]+)?}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// K32: gpu.barrier
func.func @grouped_matmul_k64(%a: tensor<?x64xf32>, %w: tensor<8x64x256xf32>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}

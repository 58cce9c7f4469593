// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.get_indptr: end_e = cumsum[(e+1)*T - 1] (0 when T = 0); exclusive
// [0, end_0, ..., end_(E-1)] or inclusive [end_0, ..., end_(E-1)], i32 or i64.
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefI32(memref<*xi32>)
func.func private @printMemrefI64(memref<*xi64>)

func.func @print_i32_1d(%t: tensor<?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?xi32> to memref<?xi32>
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @print_i64_1d(%t: tensor<?xi64>) {
  %m = bufferization.to_buffer %t : tensor<?xi64> to memref<?xi64>
  %u = memref.cast %m : memref<?xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  return
}

func.func @main() {

  // The seed example: [0, 1, 3, 5, 6, 7, 8].
  %c1 = arith.constant dense<[[0, 1], [1, 2], [3, 4], [2, 5]]> : tensor<4x2xi32>
  %d2 = tensor.cast %c1 : tensor<4x2xi32> to tensor<?x2xi32>
  %cs3 = moe.cumsum %d2 num_experts = 6 : tensor<?x2xi32> -> tensor<?xi32>
  %ip4 = moe.get_indptr %cs3 num_experts = 6 : tensor<?xi32> -> tensor<7xi32>
  %p5 = tensor.cast %ip4 : tensor<7xi32> to tensor<?xi32>
  call @print_i32_1d(%p5) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [7] strides = [1] data =
  // CHECK-NEXT: [0,  1,  3,  5,  6,  7,  8]
  %ip6 = moe.get_indptr %cs3 num_experts = 6 : tensor<?xi32> -> tensor<7xi64>
  %p7 = tensor.cast %ip6 : tensor<7xi64> to tensor<?xi64>
  call @print_i64_1d(%p7) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [7] strides = [1] data =
  // CHECK-NEXT: [0,  1,  3,  5,  6,  7,  8]
  %ip8 = moe.get_indptr %cs3 num_experts = 6 {inclusive = true} : tensor<?xi32> -> tensor<6xi32>
  %p9 = tensor.cast %ip8 : tensor<6xi32> to tensor<?xi32>
  call @print_i32_1d(%p9) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [6] strides = [1] data =
  // CHECK-NEXT: [1,  3,  5,  6,  7,  8]
  %ip10 = moe.get_indptr %cs3 num_experts = 6 {inclusive = true} : tensor<?xi32> -> tensor<6xi64>
  %p11 = tensor.cast %ip10 : tensor<6xi64> to tensor<?xi64>
  call @print_i64_1d(%p11) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [6] strides = [1] data =
  // CHECK-NEXT: [1,  3,  5,  6,  7,  8]

  // Duplicates and undispatched ids: the last offset is the number of
  // dispatched slots (7 of 10).
  %c12 = arith.constant dense<[[1, 1], [-1, 2], [0, 4], [2, 0], [-7, 1]]> : tensor<5x2xi32>
  %d13 = tensor.cast %c12 : tensor<5x2xi32> to tensor<?x2xi32>
  %cs14 = moe.cumsum %d13 num_experts = 4 : tensor<?x2xi32> -> tensor<?xi32>
  %ip15 = moe.get_indptr %cs14 num_experts = 4 : tensor<?xi32> -> tensor<5xi32>
  %p16 = tensor.cast %ip15 : tensor<5xi32> to tensor<?xi32>
  call @print_i32_1d(%p16) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [5] strides = [1] data =
  // CHECK-NEXT: [0,  2,  5,  7,  7]
  %ip17 = moe.get_indptr %cs14 num_experts = 4 : tensor<?xi32> -> tensor<5xi64>
  %p18 = tensor.cast %ip17 : tensor<5xi64> to tensor<?xi64>
  call @print_i64_1d(%p18) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [5] strides = [1] data =
  // CHECK-NEXT: [0,  2,  5,  7,  7]
  %ip19 = moe.get_indptr %cs14 num_experts = 4 {inclusive = true} : tensor<?xi32> -> tensor<4xi32>
  %p20 = tensor.cast %ip19 : tensor<4xi32> to tensor<?xi32>
  call @print_i32_1d(%p20) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [2,  5,  7,  7]
  %ip21 = moe.get_indptr %cs14 num_experts = 4 {inclusive = true} : tensor<?xi32> -> tensor<4xi64>
  %p22 = tensor.cast %ip21 : tensor<4xi64> to tensor<?xi64>
  call @print_i64_1d(%p22) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [2,  5,  7,  7]

  // T = 0: all offsets 0.
  %c23 = arith.constant dense<> : tensor<0x2xi32>
  %d24 = tensor.cast %c23 : tensor<0x2xi32> to tensor<?x2xi32>
  %cs25 = moe.cumsum %d24 num_experts = 3 : tensor<?x2xi32> -> tensor<?xi32>
  %ip26 = moe.get_indptr %cs25 num_experts = 3 : tensor<?xi32> -> tensor<4xi32>
  %p27 = tensor.cast %ip26 : tensor<4xi32> to tensor<?xi32>
  call @print_i32_1d(%p27) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [0,  0,  0,  0]
  %ip28 = moe.get_indptr %cs25 num_experts = 3 : tensor<?xi32> -> tensor<4xi64>
  %p29 = tensor.cast %ip28 : tensor<4xi64> to tensor<?xi64>
  call @print_i64_1d(%p29) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [0,  0,  0,  0]
  %ip30 = moe.get_indptr %cs25 num_experts = 3 {inclusive = true} : tensor<?xi32> -> tensor<3xi32>
  %p31 = tensor.cast %ip30 : tensor<3xi32> to tensor<?xi32>
  call @print_i32_1d(%p31) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [3] strides = [1] data =
  // CHECK-NEXT: [0,  0,  0]
  %ip32 = moe.get_indptr %cs25 num_experts = 3 {inclusive = true} : tensor<?xi32> -> tensor<3xi64>
  %p33 = tensor.cast %ip32 : tensor<3xi64> to tensor<?xi64>
  call @print_i64_1d(%p33) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [3] strides = [1] data =
  // CHECK-NEXT: [0,  0,  0]

  // A constant cumsum with a static length (T = 2, E = 3).
  %c34 = arith.constant dense<[0, 1, 2, 2, 2, 4]> : tensor<6xi32>
  %ipc = moe.get_indptr %c34 num_experts = 3 : tensor<6xi32> -> tensor<4xi64>
  %p35 = tensor.cast %ipc : tensor<4xi64> to tensor<?xi64>
  call @print_i64_1d(%p35) : (tensor<?xi64>) -> ()
  // CHECK: sizes = [4] strides = [1] data =
  // CHECK-NEXT: [0,  1,  2,  4]
  return
}

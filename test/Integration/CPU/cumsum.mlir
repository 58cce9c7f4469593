// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.cumsum: mask[t][e] counts the slots of row t naming expert e; the
// result is the inclusive prefix sum of mask in expert-major order
// (position e*T + t). Ids outside [0, E) are not counted.
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefI32(memref<*xi32>)
func.func private @printMemrefShapeI32(memref<*xi32>) attributes {llvm.emit_c_interface}
func.func private @printNewline()

func.func @print_i32_1d(%t: tensor<?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?xi32> to memref<?xi32>
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @shape_i32_1d(%t: tensor<?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?xi32> to memref<?xi32>
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  call @printMemrefShapeI32(%u) : (memref<*xi32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {

  // The seed's docstring example, dynamic T.
  %c1 = arith.constant dense<[[0, 1], [1, 2], [3, 4], [2, 5]]> : tensor<4x2xi32>
  %d2 = tensor.cast %c1 : tensor<4x2xi32> to tensor<?x2xi32>
  %cs1 = moe.cumsum %d2 num_experts = 6 : tensor<?x2xi32> -> tensor<?xi32>
  call @print_i32_1d(%cs1) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [24] strides = [1] data =
  // CHECK-NEXT: [1,  1,  1,  1,  2,  3,  3,  3,  3,  4,  4,  5,  5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  7,  8]

  // The same with a static T (static 24-element result).
  %c3 = arith.constant dense<[[0, 1], [1, 2], [3, 4], [2, 5]]> : tensor<4x2xi32>
  %cs2 = moe.cumsum %c3 num_experts = 6 : tensor<4x2xi32> -> tensor<24xi32>
  %p4 = tensor.cast %cs2 : tensor<24xi32> to tensor<?xi32>
  call @print_i32_1d(%p4) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [24] strides = [1] data =
  // CHECK-NEXT: [1,  1,  1,  1,  2,  3,  3,  3,  3,  4,  4,  5,  5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  7,  8]

  // A row naming expert 1 twice counts 2; -1, -7 and 4 (>= E) are not
  // counted.
  %c5 = arith.constant dense<[[1, 1], [-1, 2], [0, 4], [2, 0], [-7, 1]]> : tensor<5x2xi32>
  %d6 = tensor.cast %c5 : tensor<5x2xi32> to tensor<?x2xi32>
  %cs3 = moe.cumsum %d6 num_experts = 4 : tensor<?x2xi32> -> tensor<?xi32>
  call @print_i32_1d(%cs3) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [20] strides = [1] data =
  // CHECK-NEXT: [0,  0,  1,  2,  2,  4,  4,  4,  4,  5,  5,  6,  6,  7,  7,  7,  7,  7,  7,  7]

  // k = 1, E = 1 (every id 0 or out of range).
  %c7 = arith.constant dense<[[0], [3], [0], [-1], [0]]> : tensor<5x1xi32>
  %d8 = tensor.cast %c7 : tensor<5x1xi32> to tensor<?x1xi32>
  %cs4 = moe.cumsum %d8 num_experts = 1 : tensor<?x1xi32> -> tensor<?xi32>
  call @print_i32_1d(%cs4) : (tensor<?xi32>) -> ()
  // CHECK: sizes = [5] strides = [1] data =
  // CHECK-NEXT: [1,  1,  2,  2,  3]

  // T = 0: an empty result.
  %c9 = arith.constant dense<> : tensor<0x2xi32>
  %d10 = tensor.cast %c9 : tensor<0x2xi32> to tensor<?x2xi32>
  %cs5 = moe.cumsum %d10 num_experts = 6 : tensor<?x2xi32> -> tensor<?xi32>
  call @shape_i32_1d(%cs5) : (tensor<?xi32>) -> ()
  // CHECK: rank = 1 offset = 0 sizes = [0] strides = [1]{{$}}
  return
}

// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.topk: per row the k largest entries in descending order; equal values
// keep ascending expert order; NaN ranks below every number (even -inf).
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefI32(memref<*xi32>)
func.func private @printMemrefShapeF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefShapeI32(memref<*xi32>) attributes {llvm.emit_c_interface}
func.func private @printNewline()

func.func @print_bf16_2d(%t: tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xbf16>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xbf16>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xbf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: bf16, %b: f32):
    %x = arith.extf %a : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x?xf32>
  %m = bufferization.to_buffer %w : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print_f32_2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @shape_f32_2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefShapeF32(%u) : (memref<*xf32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @print_i32_2d(%t: tensor<?x?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xi32> to memref<?x?xi32>
  %u = memref.cast %m : memref<?x?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @shape_i32_2d(%t: tensor<?x?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xi32> to memref<?x?xi32>
  %u = memref.cast %m : memref<?x?xi32> to memref<*xi32>
  call @printMemrefShapeI32(%u) : (memref<*xi32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {

  // Ties take the lower index; NaN ranks below -inf; dynamic T, f32.
  %c1 = arith.constant dense<[[1.0, 3.0, 3.0, 2.0, 3.0], [0x7FC00000, 0xFF800000, 0.5, 0x7FC00000, -1.0], [0x7FC00000, 0x7FC00000, 0x7FC00000, 2.0, 0x7FC00000], [0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [-2.5, 7.0, 0x7F800000, -0.5, 7.0]]> : tensor<5x5xf32>
  %d2 = tensor.cast %c1 : tensor<5x5xf32> to tensor<?x5xf32>
  %v1, %i1 = moe.topk %d2 k = 3 : tensor<?x5xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  %p3 = tensor.cast %v1 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p3) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [5, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}3,   3,   3],
  // CHECK-NEXT:  [0.5,   -1,   -inf],
  // CHECK-NEXT:  [2,   nan,   nan],
  // CHECK-NEXT:  [-inf,   -inf,   -inf],
  // CHECK-NEXT:  [inf,   7,   7]]
  %p4 = tensor.cast %i1 : tensor<?x3xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p4) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [5, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   2,   4],
  // CHECK-NEXT:  [2,   4,   1],
  // CHECK-NEXT:  [3,   0,   1],
  // CHECK-NEXT:  [0,   1,   2],
  // CHECK-NEXT:  [2,   1,   4]]

  // k = E: a full, total order.
  %c5 = arith.constant dense<[[0.25, 0x7FC00000, 0xFF800000, 0.25], [-1.0, -2.0, 0x7FC00000, 0x7F800000]]> : tensor<2x4xf32>
  %d6 = tensor.cast %c5 : tensor<2x4xf32> to tensor<?x4xf32>
  %v2, %i2 = moe.topk %d6 k = 4 : tensor<?x4xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
  %p7 = tensor.cast %v2 : tensor<?x4xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p7) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 4] strides = [4, 1] data =
  // CHECK-NEXT: {{\[\[}}0.25,   0.25,   -inf,   nan],
  // CHECK-NEXT:  [inf,   -1,   -2,   nan]]
  %p8 = tensor.cast %i2 : tensor<?x4xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p8) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 4] strides = [4, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   3,   2,   1],
  // CHECK-NEXT:  [3,   0,   1,   2]]

  // bf16 input (values are bf16-exact), k = 2 and k = 1.
  %c9 = arith.constant dense<[[0.5, -3.0, 0.5, 1.25, 0x7FC0, 1.25], [0x7FC0, 0xFF80, 0x7FC0, -8.0, -8.0, 0xFF80]]> : tensor<2x6xbf16>
  %d10 = tensor.cast %c9 : tensor<2x6xbf16> to tensor<?x6xbf16>
  %v3, %i3 = moe.topk %d10 k = 2 : tensor<?x6xbf16> -> tensor<?x2xbf16>, tensor<?x2xi32>
  %p11 = tensor.cast %v3 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p11) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.25,   1.25],
  // CHECK-NEXT:  [-8,   -8]]
  %p12 = tensor.cast %i3 : tensor<?x2xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p12) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}3,   5],
  // CHECK-NEXT:  [3,   4]]
  %v4, %i4 = moe.topk %d10 k = 1 : tensor<?x6xbf16> -> tensor<?x1xbf16>, tensor<?x1xi32>
  %p13 = tensor.cast %v4 : tensor<?x1xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p13) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 1] strides = [1, 1] data =
  // CHECK-NEXT: {{\[\[}}1.25],
  // CHECK-NEXT:  [-8]]
  %p14 = tensor.cast %i4 : tensor<?x1xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p14) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 1] strides = [1, 1] data =
  // CHECK-NEXT: {{\[\[}}3],
  // CHECK-NEXT:  [3]]

  // T = 0: empty results of the right shape.
  %c15 = arith.constant dense<> : tensor<0x5xf32>
  %d16 = tensor.cast %c15 : tensor<0x5xf32> to tensor<?x5xf32>
  %v5, %i5 = moe.topk %d16 k = 2 : tensor<?x5xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  %p17 = tensor.cast %v5 : tensor<?x2xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p17) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 2] strides = [2, 1]{{$}}
  %p18 = tensor.cast %i5 : tensor<?x2xi32> to tensor<?x?xi32>
  call @shape_i32_2d(%p18) : (tensor<?x?xi32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 2] strides = [2, 1]{{$}}
  return
}

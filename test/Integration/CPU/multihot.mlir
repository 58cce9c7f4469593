// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.indices_to_multihot / moe.multihot_to_indices (Megatron's fused
// indices converter): ids < 0 or >= E are ignored; slots no expert maps to
// come back as 0.
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

func.func @print_i1_2d(%t: tensor<?x?xi1>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xi1>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xi1>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xi32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xi1>) outs(%e : tensor<?x?xi32>) {
  ^bb0(%a: i1, %b: i32):
    %x = arith.extui %a : i1 to i32
    linalg.yield %x : i32
  } -> tensor<?x?xi32>
  %m = bufferization.to_buffer %w : tensor<?x?xi32> to memref<?x?xi32>
  %u = memref.cast %m : memref<?x?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @shape_i1_2d(%t: tensor<?x?xi1>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xi1>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xi1>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xi32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xi1>) outs(%e : tensor<?x?xi32>) {
  ^bb0(%a: i1, %b: i32):
    %x = arith.extui %a : i1 to i32
    linalg.yield %x : i32
  } -> tensor<?x?xi32>
  %m = bufferization.to_buffer %w : tensor<?x?xi32> to memref<?x?xi32>
  %u = memref.cast %m : memref<?x?xi32> to memref<*xi32>
  call @printMemrefShapeI32(%u) : (memref<*xi32>) -> ()
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

  // E = 4: -1 and 4 are dropped; row 3 names expert 1 twice (the later slot
  // wins).
  %c1 = arith.constant dense<[[2, 0], [-1, 3], [4, 1], [1, 1]]> : tensor<4x2xi32>
  %d2 = tensor.cast %c1 : tensor<4x2xi32> to tensor<?x2xi32>
  %c3 = arith.constant dense<[[0.75, 0.25], [0.5, 0.125], [0.375, 0.625], [0.5, 0.875]]> : tensor<4x2xf32>
  %d4 = tensor.cast %c3 : tensor<4x2xf32> to tensor<?x2xf32>
  %hot5, %pm6, %pos7 = moe.indices_to_multihot %d2, %d4 num_experts = 4 : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x4xi1>, tensor<?x4xf32>, tensor<?x4xi32>
  %p8 = tensor.cast %hot5 : tensor<?x4xi1> to tensor<?x?xi1>
  call @print_i1_2d(%p8) : (tensor<?x?xi1>) -> ()
  // CHECK: sizes = [4, 4] strides = [4, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   0,   1,   0],
  // CHECK-NEXT:  [0,   0,   0,   1],
  // CHECK-NEXT:  [0,   1,   0,   0],
  // CHECK-NEXT:  [0,   1,   0,   0]]
  %p9 = tensor.cast %pm6 : tensor<?x4xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p9) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [4, 4] strides = [4, 1] data =
  // CHECK-NEXT: {{\[\[}}0.25,   0,   0.75,   0],
  // CHECK-NEXT:  [0,   0,   0,   0.125],
  // CHECK-NEXT:  [0,   0.625,   0,   0],
  // CHECK-NEXT:  [0,   0.875,   0,   0]]
  %p10 = tensor.cast %pos7 : tensor<?x4xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p10) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [4, 4] strides = [4, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   -1,   0,   -1],
  // CHECK-NEXT:  [-1,   -1,   -1,   1],
  // CHECK-NEXT:  [-1,   1,   -1,   -1],
  // CHECK-NEXT:  [-1,   1,   -1,   -1]]

  // Back to slot order: dropped slots and the duplicate's lost slot are 0.
  %back = moe.multihot_to_indices %pm6, %pos7 k = 2 : tensor<?x4xf32>, tensor<?x4xi32> -> tensor<?x2xf32>
  %p11 = tensor.cast %back : tensor<?x2xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p11) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [4, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}0.75,   0.25],
  // CHECK-NEXT:  [0,   0.125],
  // CHECK-NEXT:  [0,   0.625],
  // CHECK-NEXT:  [0,   0.875]]

  // multihot_to_indices on its own: out-of-range slots (-1, 2, 9) are
  // ignored; experts 1 and 3 both map to slot 0 (the higher expert wins).
  %c12 = arith.constant dense<[[0.5, 0.25, 0.125, 1.5], [2.0, 3.0, 4.0, 5.0]]> : tensor<2x4xbf16>
  %d13 = tensor.cast %c12 : tensor<2x4xbf16> to tensor<?x4xbf16>
  %c14 = arith.constant dense<[[-1, 0, 2, 0], [1, 9, -1, 0]]> : tensor<2x4xi32>
  %d15 = tensor.cast %c14 : tensor<2x4xi32> to tensor<?x4xi32>
  %back2 = moe.multihot_to_indices %d13, %d15 k = 2 : tensor<?x4xbf16>, tensor<?x4xi32> -> tensor<?x2xbf16>
  %p16 = tensor.cast %back2 : tensor<?x2xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p16) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 2] strides = [2, 1] data =
  // CHECK-NEXT: {{\[\[}}1.5,   0],
  // CHECK-NEXT:  [5,   2]]

  // bf16 probabilities, E = 3, k = 3.
  %c17 = arith.constant dense<[[0, 1, 2], [2, -3, 0]]> : tensor<2x3xi32>
  %d18 = tensor.cast %c17 : tensor<2x3xi32> to tensor<?x3xi32>
  %c19 = arith.constant dense<[[0.5, 0.25, 0.25], [1.0, 2.0, 4.0]]> : tensor<2x3xbf16>
  %d20 = tensor.cast %c19 : tensor<2x3xbf16> to tensor<?x3xbf16>
  %hot21, %pm22, %pos23 = moe.indices_to_multihot %d18, %d20 num_experts = 3 : tensor<?x3xi32>, tensor<?x3xbf16> -> tensor<?x3xi1>, tensor<?x3xbf16>, tensor<?x3xi32>
  %p24 = tensor.cast %hot21 : tensor<?x3xi1> to tensor<?x?xi1>
  call @print_i1_2d(%p24) : (tensor<?x?xi1>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}1,   1,   1],
  // CHECK-NEXT:  [1,   0,   1]]
  %p25 = tensor.cast %pm22 : tensor<?x3xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p25) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0.5,   0.25,   0.25],
  // CHECK-NEXT:  [4,   0,   1]]
  %p26 = tensor.cast %pos23 : tensor<?x3xi32> to tensor<?x?xi32>
  call @print_i32_2d(%p26) : (tensor<?x?xi32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}0,   1,   2],
  // CHECK-NEXT:  [2,   -1,   0]]

  // T = 0.
  %c27 = arith.constant dense<> : tensor<0x2xi32>
  %d28 = tensor.cast %c27 : tensor<0x2xi32> to tensor<?x2xi32>
  %c29 = arith.constant dense<> : tensor<0x2xf32>
  %d30 = tensor.cast %c29 : tensor<0x2xf32> to tensor<?x2xf32>
  %h0, %pm0, %pos0 = moe.indices_to_multihot %d28, %d30 num_experts = 4 : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x4xi1>, tensor<?x4xf32>, tensor<?x4xi32>
  %p31 = tensor.cast %h0 : tensor<?x4xi1> to tensor<?x?xi1>
  call @shape_i1_2d(%p31) : (tensor<?x?xi1>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 4] strides = [4, 1]{{$}}
  %p32 = tensor.cast %pm0 : tensor<?x4xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p32) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 4] strides = [4, 1]{{$}}
  %p33 = tensor.cast %pos0 : tensor<?x4xi32> to tensor<?x?xi32>
  call @shape_i32_2d(%p33) : (tensor<?x?xi32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 4] strides = [4, 1]{{$}}
  %b0 = moe.multihot_to_indices %pm0, %pos0 k = 2 : tensor<?x4xf32>, tensor<?x4xi32> -> tensor<?x2xf32>
  %p34 = tensor.cast %b0 : tensor<?x2xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p34) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 2] strides = [2, 1]{{$}}
  return
}

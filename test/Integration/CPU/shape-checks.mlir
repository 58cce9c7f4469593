// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s --check-prefix=OK
// RUN: sed -e 's/%nlogits = arith.constant 5/%nlogits = arith.constant 4/' %s \
// RUN:   | moe-opt --moe-lower-to-cpu | not --crash %mlir-cpu-runner 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISMATCH
// RUN: sed -e 's/%nlogits = arith.constant 5/%nlogits = arith.constant 4/' %s \
// RUN:   | moe-opt "--moe-lower-to-cpu=shape-checks=none" | %mlir-cpu-runner \
// RUN:   | FileCheck %s --check-prefix=UNCHECKED
//
// Run-time shape checks on the CPU path (mlir-runner: abort mode). The
// layer's T is dynamic; main builds x with 5 rows and logits with
// %nlogits rows. With 5 the call runs; with 4 (the sed line) the checked
// build aborts with the located message before any work, and the build
// without checks silently returns 4 rows (what the checks exist for).

// OK: sizes = [5, 4]
// MISMATCH: @layer: dimension 0 of argument 1 ('logits' of moe.ffn at <stdin>:[[#]]:8) is 4, but dimension 0 of argument 0 ('x' of moe.ffn at <stdin>:[[#]]:8) is 5: they must be equal (T)
// MISMATCH-NOT: sizes =
// UNCHECKED: sizes = [4, 4]

func.func @layer(%x: tensor<?x4xf32>, %logits: tensor<?x2xf32>,
                 %w_up: tensor<2x4x8xf32>, %w_down: tensor<2x4x4xf32>)
    -> tensor<?x4xf32> {
  %y = moe.ffn %x, %logits, %w_up, %w_down k = 1 scoring = softmax
      activation = silu layout = concat
      : tensor<?x4xf32>, tensor<?x2xf32>, tensor<2x4x8xf32>,
        tensor<2x4x4xf32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %nx = arith.constant 5 : index
  %nlogits = arith.constant 5 : index
  %one = arith.constant 0.5 : f32
  %x = tensor.generate %nx {
  ^bb0(%i: index, %j: index):
    tensor.yield %one : f32
  } : tensor<?x4xf32>
  %logits = tensor.generate %nlogits {
  ^bb0(%i: index, %j: index):
    tensor.yield %one : f32
  } : tensor<?x2xf32>
  %w_up = arith.constant dense<0.25> : tensor<2x4x8xf32>
  %w_down = arith.constant dense<0.125> : tensor<2x4x4xf32>
  %y = call @layer(%x, %logits, %w_up, %w_down)
      : (tensor<?x4xf32>, tensor<?x2xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>)
      -> tensor<?x4xf32>
  %m = bufferization.to_buffer %y : tensor<?x4xf32> to memref<?x4xf32>
  %u = memref.cast %m : memref<?x4xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

// A Mixtral-style MoE layer, shrunk to fit a terminal: 8 experts, top-2,
// softmax routing with renormalised weights, SiLU-gated experts (concat
// layout), H = 32, I = 64, and a dynamic token count T (here 5 tokens).
//
// `@moe_layer` is what a frontend emits: one moe.ffn. `@main` makes
// deterministic inputs with tensor.generate, calls the layer and prints the
// T x H result.
//
//   moe-opt examples/mixtral_layer.mlir --moe-decompose     # the primitive chain
//   moe-opt examples/mixtral_layer.mlir --moe-lower-to-cpu \
//     | mlir-runner -e main -entry-point-result=void \
//         -shared-libs=<llvm>/lib/libmlir_runner_utils.so,<llvm>/lib/libmlir_c_runner_utils.so

func.func @moe_layer(%x: tensor<?x32xf32>, %logits: tensor<?x8xf32>,
                     %w_up: tensor<8x32x128xf32>, %w_down: tensor<8x64x32xf32>)
    -> tensor<?x32xf32> {
  %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat {normalize = true}
      : tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>,
        tensor<8x64x32xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

func.func private @printMemrefF32(memref<*xf32>)

/// scale * sin(a * i + b * j + c * k)
func.func private @wave(%i: index, %j: index, %k: index,
                        %a: f32, %b: f32, %c: f32, %scale: f32) -> f32 {
  %ii = arith.index_cast %i : index to i32
  %jj = arith.index_cast %j : index to i32
  %kk = arith.index_cast %k : index to i32
  %fi = arith.sitofp %ii : i32 to f32
  %fj = arith.sitofp %jj : i32 to f32
  %fk = arith.sitofp %kk : i32 to f32
  %p = arith.mulf %a, %fi : f32
  %q = arith.mulf %b, %fj : f32
  %r = arith.mulf %c, %fk : f32
  %pq = arith.addf %p, %q : f32
  %arg = arith.addf %pq, %r : f32
  %s = math.sin %arg : f32
  %v = arith.mulf %scale, %s : f32
  return %v : f32
}

func.func @main() {
  %t = arith.constant 5 : index
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %small = arith.constant 0.05 : f32
  %a = arith.constant 0.37 : f32
  %b = arith.constant 0.11 : f32
  // x[i, j] = sin(0.37 i + 0.11 j)
  %x = tensor.generate %t {
  ^bb0(%i: index, %j: index):
    %v = func.call @wave(%i, %j, %c0, %a, %b, %zero, %one)
        : (index, index, index, f32, f32, f32, f32) -> f32
    tensor.yield %v : f32
  } : tensor<?x32xf32>
  // logits[i, e] = 2 sin(0.9 i + 0.7 e)
  %la = arith.constant 0.9 : f32
  %lb = arith.constant 0.7 : f32
  %logits = tensor.generate %t {
  ^bb0(%i: index, %e: index):
    %v = func.call @wave(%i, %e, %c0, %la, %lb, %zero, %two)
        : (index, index, index, f32, f32, f32, f32) -> f32
    tensor.yield %v : f32
  } : tensor<?x8xf32>
  // w_up[e, h, n] = 0.05 sin(0.3 e + 0.05 h + 0.013 n)
  %ua = arith.constant 0.3 : f32
  %ub = arith.constant 0.05 : f32
  %uc = arith.constant 0.013 : f32
  %w_up = tensor.generate {
  ^bb0(%e: index, %h: index, %n: index):
    %v = func.call @wave(%e, %h, %n, %ua, %ub, %uc, %small)
        : (index, index, index, f32, f32, f32, f32) -> f32
    tensor.yield %v : f32
  } : tensor<8x32x128xf32>
  // w_down[e, i, h] = 0.05 sin(0.5 e + 0.021 i + 0.07 h)
  %da = arith.constant 0.5 : f32
  %db = arith.constant 0.021 : f32
  %dc = arith.constant 0.07 : f32
  %w_down = tensor.generate {
  ^bb0(%e: index, %i: index, %h: index):
    %v = func.call @wave(%e, %i, %h, %da, %db, %dc, %small)
        : (index, index, index, f32, f32, f32, f32) -> f32
    tensor.yield %v : f32
  } : tensor<8x64x32xf32>
  %y = func.call @moe_layer(%x, %logits, %w_up, %w_down)
      : (tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>,
         tensor<8x64x32xf32>) -> tensor<?x32xf32>
  %buf = bufferization.to_buffer %y : tensor<?x32xf32> to memref<?x32xf32>
  %u = memref.cast %buf : memref<?x32xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

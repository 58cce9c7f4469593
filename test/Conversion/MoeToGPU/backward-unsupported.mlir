// RUN: moe-opt %s --convert-moe-to-gpu -verify-diagnostics -split-input-file

// The backward ops have no GPU lowering yet: the pass reports the op and
// fails before rewriting anything (--moe-lower-to-cpu executes them).
func.func @glu_grad(%d: tensor<?x32xbf16>, %h: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'moe.glu_grad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r = moe.glu_grad %d, %h silu interleaved : tensor<?x32xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

// -----

func.func @grouped_matmul_wgrad(%dy: tensor<?x32xbf16>, %x: tensor<?x16xbf16>, %off: tensor<5xi32>) -> tensor<4x32x16xf32> {
  // expected-error @+1 {{'moe.grouped_matmul_wgrad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r = moe.grouped_matmul_wgrad %dy, %x offsets(%off : tensor<5xi32>) : tensor<?x32xbf16>, tensor<?x16xbf16> -> tensor<4x32x16xf32>
  return %r : tensor<4x32x16xf32>
}

// -----

func.func @combine_grad(%g: tensor<?x32xbf16>) -> tensor<?x2x32xbf16> {
  // expected-error @+1 {{'moe.combine_grad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r = moe.combine_grad %g : tensor<?x32xbf16> -> tensor<?x2x32xbf16>
  return %r : tensor<?x2x32xbf16>
}

// -----

func.func @route_grad(%g: tensor<?x2xf32>, %l: tensor<?x8xf32>, %i: tensor<?x2xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'moe.route_grad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r = moe.route_grad %g, %l, %i scoring = softmax : tensor<?x2xf32>, tensor<?x8xf32>, tensor<?x2xi32> -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

func.func @row_dot(%a: tensor<?x32xbf16>, %b: tensor<?x32xbf16>) -> tensor<?xf32> {
  // expected-error @+1 {{'moe.row_dot' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r = moe.row_dot %a, %b : tensor<?x32xbf16>, tensor<?x32xbf16> -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// The composite is reported as itself (not as a primitive of its
// decomposition: the check runs before any rewrite).
func.func @ffn_grad(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'moe.ffn_grad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>
  return %r#0 : tensor<?x64xbf16>
}

// -----

// The training forward too (it exists for the backward): reported as
// itself, not as moe.ffn's chain that it decomposes into.
func.func @ffn_train(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>) -> tensor<?x96xbf16> {
  // expected-error @+1 {{'moe.ffn_train' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %y, %h, %w, %i = moe.ffn_train %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x96xbf16>, tensor<?x2xf32>, tensor<?x2xi32>
  return %h : tensor<?x96xbf16>
}

// -----

// moe.ffn_grad's saved form likewise.
func.func @ffn_grad_saved(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>, %h: tensor<?x96xbf16>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'moe.ffn_grad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r:4 = moe.ffn_grad %dy, %x, %l, %wu, %wd saved(%h, %w, %i : tensor<?x96xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) k = 2 scoring = softmax activation = silu layout = concat
      : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16>
      -> tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xf32>, tensor<8x48x64xf32>
  return %r#0 : tensor<?x64xbf16>
}

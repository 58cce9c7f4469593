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

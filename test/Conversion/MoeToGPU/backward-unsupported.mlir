// RUN: moe-opt %s --convert-moe-to-gpu -verify-diagnostics

// The backward ops have no GPU lowering yet: the pass reports the op and
// fails before rewriting anything (--moe-lower-to-cpu executes them).
func.func @glu_grad(%d: tensor<?x32xbf16>, %h: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'moe.glu_grad' op has no GPU lowering yet: the backward ops run with --moe-lower-to-cpu}}
  %r = moe.glu_grad %d, %h silu interleaved : tensor<?x32xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>
  return %r : tensor<?x64xbf16>
}

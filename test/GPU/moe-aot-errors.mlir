// moe-aot stops at the first failing step, shows that step's diagnostics
// and exits non-zero without writing the library.

// RUN: rm -f %t.so
// RUN: not %moe-aot %s -o %t.so --pipeline=--canonicalize 2>&1 | FileCheck %s
// RUN: not ls %t.so
// A pipeline that does not parse, and an argument that is not a flag.
// RUN: not %moe-aot %s -o %t.so --pipeline=--no-such-pass 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PASS
// RUN: not %moe-aot %s -o %t.so --pipeline="--canonicalize cse" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FLAG

// PASS: moe-aot: error: cannot read --pipeline: invalid pass 'no-such-pass': {{.*}}no-such-pass
// FLAG: moe-aot: error: cannot read --pipeline: 'cse' is not a pass flag

// CHECK: moe-aot-errors.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error: use of undeclared SSA value name
// CHECK: moe-aot: error: cannot parse {{.*}}moe-aot-errors.mlir
func.func @broken(%x: f32) -> f32 {
  %c = arith.constant 1.0 : f32
  %0 = arith.addf %x, %undefined : f32
  return %0 : f32
}

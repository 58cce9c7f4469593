// moe-aot stops at the first failing step, shows that step's diagnostics
// and exits non-zero without writing the library.

// RUN: rm -f %t.so
// RUN: not %moe-aot %s -o %t.so --moe-opt %llvm_tools_dir/mlir-opt \
// RUN:   --pipeline=--canonicalize 2>&1 | FileCheck %s
// RUN: not ls %t.so

// CHECK: moe-aot: error: moe-opt failed (exit code 1): {{.*}}mlir-opt {{.*}}moe-aot-errors.mlir --canonicalize
// CHECK: moe-aot-errors.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error: use of undeclared SSA value name
func.func @broken(%x: f32) -> f32 {
  %c = arith.constant 1.0 : f32
  %0 = arith.addf %x, %undefined : f32
  return %0 : f32
}

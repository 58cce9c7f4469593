// RUN: moe-opt %s --moe-emit-shape-checks --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-emit-shape-checks=mode=abort --split-input-file | FileCheck %s --check-prefix=ABORT
// RUN: moe-opt %s --moe-emit-shape-checks=report-function=my_report --split-input-file | FileCheck %s --check-prefix=CUSTOM

// Report mode: each check branches to a block that reports and returns
// (an empty result buffer) before the body runs; the result's record does
// not apply (the result is returned, not an out-parameter).
// The message as a printf format of the two sizes (no newline).
// CHECK-DAG: llvm.mlir.global internal constant @__moe_shape_check_f_0("@f: rows %lld vs %lld\00")
// CHECK-DAG: func.func private @moeRuntimeReportShapeError(!llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[X:.*]]: memref<?x4xf32>, %[[L:.*]]: memref<?x8xf32>) -> memref<?x4xf32>
// CHECK-NOT: moe.shape_checks
// CHECK: %[[DX:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x4xf32>
// CHECK: %[[IX:.*]] = arith.index_cast %[[DX]] : index to i64
// CHECK: %[[DL:.*]] = memref.dim %[[L]], %{{.*}} : memref<?x8xf32>
// CHECK: %[[IL:.*]] = arith.index_cast %[[DL]] : index to i64
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[IX]], %[[IL]] : i64
// CHECK: cf.cond_br %[[OK]], ^[[NEXT:.*]], ^[[FAIL0:bb[0-9]+]]
// CHECK: ^[[NEXT]]:
// CHECK: %[[OK1:.*]] = arith.cmpi sle, %{{.*}}, %{{.*}} : i64
// CHECK: cf.cond_br %[[OK1]], ^[[BODY:.*]], ^[[FAIL1:bb[0-9]+]]
// CHECK: ^[[BODY]]:
// CHECK: memref.copy
// CHECK: return
// CHECK: ^[[FAIL0]]:
// CHECK: %[[MSG:.*]] = llvm.mlir.addressof @__moe_shape_check_f_0
// CHECK: call @moeRuntimeReportShapeError(%{{.*}}, %[[IX]], %[[IL]])
// CHECK: %[[EMPTY:.*]] = memref.alloc(%{{.*}}) : memref<?x4xf32>
// CHECK: return %[[EMPTY]]
// CHECK: ^[[FAIL1]]:
// CHECK: call @moeRuntimeReportShapeError

// Abort mode: the failure block prints the message with the sizes to
// stderr (dprintf(2, ...), "{0}" / "{1}" as %lld, "%" escaped) and aborts.
// ABORT-DAG: llvm.mlir.global internal constant @__moe_shape_check_f_0("@f: rows %lld vs %lld\0A\00")
// ABORT-DAG: llvm.mlir.global internal constant @__moe_shape_check_f_1("@f: x has %lld rows, at most %lld\0A\00")
// ABORT-DAG: llvm.func @abort()
// ABORT-DAG: llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32
// ABORT-LABEL: func.func @f(
// ABORT-NOT: moeRuntimeReportShapeError
// ABORT: %[[AX:.*]] = arith.index_cast %{{.*}} : index to i64
// ABORT: %[[AL:.*]] = arith.index_cast %{{.*}} : index to i64
// ABORT: cf.cond_br %{{.*}}, ^{{.*}}, ^[[AFAIL:bb[0-9]+]]
// ABORT: ^[[AFAIL]]:
// ABORT: llvm.mlir.addressof @__moe_shape_check_f_0
// ABORT: %[[FD:.*]] = arith.constant 2 : i32
// ABORT: llvm.call @dprintf(%[[FD]], %{{.*}}, %[[AX]], %[[AL]])
// ABORT-NEXT: llvm.call @abort()
// ABORT: llvm.call @dprintf
// ABORT-NEXT: llvm.call @abort()
// ABORT: llvm.mlir.global internal constant @__moe_shape_check_g_1("%lld %% %lld\0A\00")

// CUSTOM: func.func private @my_report(!llvm.ptr, i64, i64)
// CUSTOM: call @my_report
func.func @f(%x: memref<?x4xf32>, %l: memref<?x8xf32>) -> memref<?x4xf32>
    attributes {moe.shape_checks = [
      {kind = "eq", lhs = array<i64: 0, 0>, rhs = array<i64: 1, 0>,
       message = "@f: rows {0} vs {1}"},
      {kind = "max", lhs = array<i64: 0, 0>, value = 100 : i64,
       message = "@f: x has {0} rows, at most {1}"},
      {kind = "eq", lhs = array<i64: 2, 0>, rhs = array<i64: 0, 0>, output,
       message = "@f: the out-parameter"}]} {
  %c0 = arith.constant 0 : index
  %d = memref.dim %x, %c0 : memref<?x4xf32>
  %y = memref.alloc(%d) : memref<?x4xf32>
  memref.copy %x, %y : memref<?x4xf32> to memref<?x4xf32>
  return %y : memref<?x4xf32>
}

// -----

// Out-parameters: the result's record applies; ratios compare without
// overflow (num | lhs, den | rhs, lhs / num == rhs / den); multiples never
// divide by zero.
// CHECK-LABEL: func.func @g(
// CHECK-SAME: %[[A:.*]]: memref<?xi32>, %[[B:.*]]: memref<?x2xi32>, %[[OUT:.*]]: memref<?xi32>)
// CHECK: memref.dim %[[OUT]]
// CHECK: %[[R1:.*]] = arith.remsi %{{.*}}, %{{.*}} : i64
// CHECK: %[[R2:.*]] = arith.remsi %{{.*}}, %{{.*}} : i64
// CHECK: arith.divsi
// CHECK: arith.divsi
// CHECK: cf.cond_br
// CHECK: %[[Z:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i64
// CHECK: arith.select %[[Z]]
// CHECK: arith.remsi
// CHECK: arith.select %[[Z]]
// CHECK: cf.cond_br
// CHECK: ^bb{{.*}}:
// CHECK-NEXT: return
// CHECK-NOT: memref.alloc
func.func @g(%a: memref<?xi32>, %b: memref<?x2xi32>, %out: memref<?xi32>)
    attributes {moe.shape_checks = [
      {kind = "eq", lhs = array<i64: 2, 0>, rhs = array<i64: 1, 0>, output,
       num = 2 : i64, den = 1 : i64, message = "out {0} b {1}"},
      {kind = "multiple", lhs = array<i64: 0, 0>, rhs = array<i64: 1, 0>,
       message = "{0} % {1}"}]} {
  return
}

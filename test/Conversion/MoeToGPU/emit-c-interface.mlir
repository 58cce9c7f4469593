// RUN: moe-opt %s --moe-emit-c-interface | FileCheck %s

// llvm.emit_c_interface goes on public functions with a body only.

// CHECK-LABEL: func.func @public_fn(
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func @public_fn(%a: memref<?xf32>) -> memref<?xf32> {
  return %a : memref<?xf32>
}

// CHECK-LABEL: func.func private @private_fn(
// CHECK-NOT: llvm.emit_c_interface
// CHECK: return
func.func private @private_fn(%a: memref<?xf32>) {
  return
}

// CHECK-LABEL: func.func private @external_decl(memref<?xf32>)
// CHECK-NOT: llvm.emit_c_interface
// CHECK-LABEL: func.func @public_with_attrs(
// CHECK-SAME: attributes {llvm.emit_c_interface, some.attr = 1 : i64}
func.func private @external_decl(memref<?xf32>)

func.func @public_with_attrs(%a: memref<?xf32>) attributes {some.attr = 1 : i64} {
  func.call @external_decl(%a) : (memref<?xf32>) -> ()
  return
}

// RUN: moe-opt %s -split-input-file --moe-gpu-device-memory -verify-diagnostics | FileCheck %s

// Host constants read outside kernels become device buffers uploaded once,
// when the library is loaded: the bytes move into an internal LLVM global,
// a constructor uploads them into a pointer slot, a destructor frees it,
// and each memref.get_global becomes a memref of the slot's pointer. The
// memref.global itself is gone (nothing refers to it any more).

// CHECK-NOT: memref.global
// CHECK-DAG: llvm.mlir.global internal constant @__moe_host_weights(dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>) {addr_space = 0 : i32, alignment = 64 : i64} : !llvm.array<2 x array<3 x f32>>
// CHECK-DAG: llvm.mlir.global internal @__moe_device_weights() {addr_space = 0 : i32, alignment = 8 : i64} : !llvm.ptr
// CHECK-DAG: llvm.mlir.global internal constant @__moe_host_table(dense<7> : tensor<4xi32>) {addr_space = 0 : i32, alignment = 16 : i64} : !llvm.array<4 x i32>
// CHECK-DAG: llvm.mlir.global internal @__moe_device_table() {addr_space = 0 : i32, alignment = 8 : i64} : !llvm.ptr
// CHECK-DAG: llvm.func @moeRuntimeUploadConstant(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @moeRuntimeFreeConstant(!llvm.ptr)
// CHECK-LABEL: func.func @uses(
// CHECK:      %[[SLOT:[a-z0-9_]+]] = llvm.mlir.addressof @__moe_device_weights : !llvm.ptr
// CHECK-NEXT: %[[PTR:[a-z0-9_]+]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK:      %[[DESC:[a-z0-9_]+]] = llvm.insertvalue %{{.*}}[4, 1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK-NEXT: %[[W:[a-z0-9_]+]] = builtin.unrealized_conversion_cast %[[DESC]] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<2x3xf32>
// CHECK-NOT:  memref.get_global
// CHECK:      gpu.launch
// CHECK:      memref.load %[[W]]
// CHECK-LABEL: llvm.func internal @__moe_upload_constants()
// CHECK:      %[[H:[a-z0-9_]+]] = llvm.mlir.addressof @__moe_host_weights : !llvm.ptr
// CHECK-NEXT: %[[N:[a-z0-9_]+]] = llvm.mlir.constant(24 : i64) : i64
// CHECK-NEXT: %[[D:[a-z0-9_]+]] = llvm.call @moeRuntimeUploadConstant(%[[H]], %[[N]]) : (!llvm.ptr, i64) -> !llvm.ptr
// CHECK-NEXT: %[[S:[a-z0-9_]+]] = llvm.mlir.addressof @__moe_device_weights : !llvm.ptr
// CHECK-NEXT: llvm.store %[[D]], %[[S]] : !llvm.ptr, !llvm.ptr
// CHECK:      llvm.mlir.constant(16 : i64) : i64
// CHECK:      llvm.return
// CHECK-LABEL: llvm.func internal @__moe_free_constants()
// CHECK:      %[[S2:[a-z0-9_]+]] = llvm.mlir.addressof @__moe_device_weights : !llvm.ptr
// CHECK-NEXT: %[[D2:[a-z0-9_]+]] = llvm.load %[[S2]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.call @moeRuntimeFreeConstant(%[[D2]]) : (!llvm.ptr) -> ()
// CHECK:      llvm.return
// CHECK: llvm.mlir.global_ctors ctors = [@__moe_upload_constants], priorities = [65535 : i32], data = [#llvm.zero]
// CHECK: llvm.mlir.global_dtors dtors = [@__moe_free_constants], priorities = [65535 : i32], data = [#llvm.zero]
memref.global "private" constant @weights : memref<2x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> {alignment = 64 : i64}
memref.global "private" constant @table : memref<4xi32> = dense<7>
func.func @uses(%i: index) -> (f32, memref<4xi32>) {
  %c1 = arith.constant 1 : index
  %w = memref.get_global @weights : memref<2x3xf32>
  %t = memref.get_global @table : memref<4xi32>
  %out = memref.alloc() : memref<1xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %w[%tx, %tx] : memref<2x3xf32>
    memref.store %v, %out[%tx] : memref<1xf32>
    gpu.terminator
  }
  %r = memref.load %out[%i] : memref<1xf32>
  return %r, %t : f32, memref<4xi32>
}

// -----

// The same global read twice is uploaded once; a constructor list already
// in the module is kept.
// CHECK-LABEL: func.func @twice(
// CHECK-COUNT-2: llvm.mlir.addressof @__moe_device_c : !llvm.ptr
// CHECK-LABEL: llvm.func internal @__moe_upload_constants()
// CHECK-COUNT-1: llvm.call @moeRuntimeUploadConstant
// CHECK-NOT: llvm.call @moeRuntimeUploadConstant
// CHECK: llvm.mlir.global_ctors ctors = [@other, @__moe_upload_constants], priorities = [7 : i32, 65535 : i32], data = [#llvm.zero, #llvm.zero]
memref.global "private" constant @c : memref<8xf32> = dense<1.5>
llvm.func @other() {
  llvm.return
}
llvm.mlir.global_ctors ctors = [@other], priorities = [7 : i32], data = [#llvm.zero]
func.func @twice() -> (memref<8xf32>, memref<8xf32>) {
  %a = memref.get_global @c : memref<8xf32>
  %b = memref.get_global @c : memref<8xf32>
  return %a, %b : memref<8xf32>, memref<8xf32>
}

// -----

// A resource whose data was elided is uploaded as zeros, with a warning.
// CHECK-LABEL: llvm.mlir.global internal constant @__moe_host_elided()
// CHECK-NEXT: llvm.mlir.zero : !llvm.array<4 x bf16>
memref.global "private" constant @elided : memref<4xbf16> = dense_resource<__elided__>
func.func @use_elided() -> memref<4xbf16> {
  // expected-warning @below {{moe-gpu-device-memory: host constant 'elided' has no data (elided resource): uploaded as zeros}}
  %a = memref.get_global @elided : memref<4xbf16>
  return %a : memref<4xbf16>
}

// -----

// dense_resource data is kept as it is.
// CHECK: llvm.mlir.global internal constant @__moe_host_blob(dense_resource<blob> : tensor<2xf32>)
memref.global "private" constant @blob : memref<2xf32> = dense_resource<blob>
func.func @use_blob() -> memref<2xf32> {
  %a = memref.get_global @blob : memref<2xf32>
  return %a : memref<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}

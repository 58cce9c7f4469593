// RUN: moe-opt %s --moe-gpu-device-memory | FileCheck %s

// Host-side buffers move to device memory: memref.alloc -> gpu.alloc,
// memref.dealloc -> gpu.dealloc, memref.copy (identity layouts) ->
// gpu.memcpy (target first). Ops inside a gpu.launch body or a gpu.module
// are kernel-side and stay as they are.

// CHECK-LABEL: func.func @host(
// CHECK-SAME: %[[N:[a-z0-9_]+]]: index, %[[SRC:[a-z0-9_]+]]: memref<16xf32>
// CHECK-NOT: memref.alloc
// CHECK: %[[A:[a-z0-9_]+]] = gpu.alloc (%[[N]]) : memref<?xf32>
// CHECK-NEXT: %[[B:[a-z0-9_]+]] = gpu.alloc () : memref<16xf32>
// CHECK-NEXT: gpu.memcpy %[[B]], %[[SRC]] : memref<16xf32>, memref<16xf32>
// CHECK-NOT: memref.copy
// CHECK: gpu.launch
// Kernel-side private buffer: untouched.
// CHECK-NEXT: %[[T:[a-z0-9_]+]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.load %[[B]]
// CHECK-NEXT: memref.store %{{[a-z0-9_]+}}, %[[T]]
// CHECK-NEXT: memref.dealloc %[[T]] : memref<4xf32>
// CHECK-NEXT: gpu.terminator
// CHECK: gpu.dealloc %[[B]] : memref<16xf32>
// CHECK-NOT: memref.dealloc
// CHECK: return %[[A]] : memref<?xf32>
func.func @host(%n: index, %src: memref<16xf32>) -> memref<?xf32> {
  %c1 = arith.constant 1 : index
  %a = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %src, %b : memref<16xf32> to memref<16xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %t = memref.alloc() : memref<4xf32>
    %v = memref.load %b[%tx] : memref<16xf32>
    memref.store %v, %t[%tx] : memref<4xf32>
    memref.dealloc %t : memref<4xf32>
    gpu.terminator
  }
  memref.dealloc %b : memref<16xf32>
  return %a : memref<?xf32>
}

// Host ops nested in control flow are rewritten too; a get_global and a
// strided copy inside a kernel are not host accesses and are left alone.
// CHECK-LABEL: func.func @nested(
// CHECK: scf.for
// CHECK-NEXT: %[[X:[a-z0-9_]+]] = gpu.alloc () : memref<8x8xf16>
// CHECK-NEXT: gpu.dealloc %[[X]] : memref<8x8xf16>
// CHECK: gpu.launch
// CHECK: memref.get_global @table : memref<4xf32>
// CHECK: memref.copy %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : memref<4xf32, strided<[2]>> to memref<4xf32>
// CHECK: gpu.terminator
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @nested(%n: index, %s: memref<4xf32, strided<[2]>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.alloc() : memref<8x8xf16>
    memref.dealloc %x : memref<8x8xf16>
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %g = memref.get_global @table : memref<4xf32>
    %t = memref.alloca() : memref<4xf32>
    memref.copy %s, %t : memref<4xf32, strided<[2]>> to memref<4xf32>
    gpu.terminator
  }
  return
}

// Outlined kernels (gpu.func in a gpu.module) keep their memref ops.
// CHECK-LABEL: gpu.module @kernels
// CHECK: gpu.func @k(
// CHECK-NEXT: %[[T:[a-z0-9_]+]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.dealloc %[[T]] : memref<4xf32>
// CHECK-NOT: gpu.alloc
// CHECK-NOT: gpu.dealloc
gpu.module @kernels {
  gpu.func @k(%m: memref<16xf32>) kernel {
    %t = memref.alloc() : memref<4xf32>
    memref.dealloc %t : memref<4xf32>
    gpu.return
  }
}

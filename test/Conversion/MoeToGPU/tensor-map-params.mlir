// RUN: moe-opt %s --pass-pipeline='builtin.module(gpu.module(moe-gpu-tensor-map-params))' | FileCheck %s

// A kernel argument holding a tensor map by value (!llvm.array<16 x i64>)
// whose uses all take its address (unrealized_conversion_cast to
// !llvm.ptr) becomes a byval grid-constant pointer, 64-byte aligned, and
// the casts are gone. An array argument used as a value, one also used
// otherwise, and a non-kernel function keep their types.

// CHECK-LABEL: llvm.func @k(
// CHECK-SAME: %[[M:[a-z0-9]+]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}
// CHECK-SAME: %[[V:[a-z0-9]+]]: !llvm.array<16 x i64>
// CHECK-SAME: %[[B:[a-z0-9]+]]: !llvm.array<16 x i64>
// CHECK-NOT: unrealized_conversion_cast %[[M]]
// CHECK: llvm.load %[[M]]
// CHECK: llvm.extractvalue %[[V]][0]
// CHECK: builtin.unrealized_conversion_cast %[[B]]
// CHECK: llvm.extractvalue %[[B]][1]

// CHECK-LABEL: llvm.func @notKernel(
// CHECK-SAME: !llvm.array<16 x i64>
// CHECK: builtin.unrealized_conversion_cast
module attributes {gpu.container_module} {
  gpu.module @m {
    llvm.func @k(%m: !llvm.array<16 x i64>, %v: !llvm.array<16 x i64>,
                 %both: !llvm.array<16 x i64>, %out: !llvm.ptr)
        attributes {nvvm.kernel} {
      %p = builtin.unrealized_conversion_cast %m : !llvm.array<16 x i64> to !llvm.ptr
      %w = llvm.load %p : !llvm.ptr -> i64
      %x = llvm.extractvalue %v[0] : !llvm.array<16 x i64>
      %q = builtin.unrealized_conversion_cast %both : !llvm.array<16 x i64> to !llvm.ptr
      %y = llvm.extractvalue %both[1] : !llvm.array<16 x i64>
      %s = llvm.add %w, %x : i64
      %t = llvm.add %s, %y : i64
      llvm.store %t, %out : i64, !llvm.ptr
      llvm.store %t, %q : i64, !llvm.ptr
      llvm.return
    }
    llvm.func @notKernel(%m: !llvm.array<16 x i64>) {
      %p = builtin.unrealized_conversion_cast %m : !llvm.array<16 x i64> to !llvm.ptr
      %c = llvm.mlir.constant(0 : i64) : i64
      llvm.store %c, %p : i64, !llvm.ptr
      llvm.return
    }
  }
}

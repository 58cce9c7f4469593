// moe-gpu-module-to-binary merges the gpu.modules into at most `modules`
// before compiling them (here 1, and 0: apart): the group is named
// after its largest module, each kernel after the module it came from
// (its __pdl suffix kept), clashing symbols are renamed with their uses,
// identical external declarations shared, and the launches follow.
// Modules with other attributes (another target) stay apart.
//
// RUN: moe-opt %s --mlir-disable-threading --moe-gpu-module-to-binary="format=isa modules=1" \
// RUN:   | FileCheck %s
// RUN: moe-opt %s --mlir-disable-threading \
// RUN:   --moe-gpu-module-to-binary="format=isa modules=0" \
// RUN:   | FileCheck %s --check-prefix=APART
// One declaration of the external function in the merged module:
// RUN: moe-opt %s --mlir-disable-threading --moe-gpu-module-to-binary="format=isa modules=1" \
// RUN:   | grep -o "extern .func" | wc -l | FileCheck %s --check-prefix=ONE
// ONE: {{^ *1$}}

// CHECK-LABEL: llvm.func @host(
// CHECK: gpu.launch_func @big::@small blocks
// CHECK: gpu.launch_func @big::@big__pdl blocks
// CHECK: gpu.launch_func @other::@other blocks
// CHECK: gpu.launch_func @big::@two_first blocks
// CHECK: gpu.launch_func @big::@two_second blocks
// The kernels, with the shared buffer each one used and one declaration of
// the external function.
// CHECK: gpu.binary @big [#gpu.object<#nvvm.target<chip = "sm_90a">, properties = {{.*}}, assembly = "
// CHECK-SAME: .extern .func {{ *[(][^)]*[)]}} ext
// CHECK-SAME: .entry big__pdl(
// CHECK-SAME: .shared .align 4 .b8 buf[64]
// CHECK-SAME: .entry small(
// CHECK-SAME: .shared .align 4 .b8 buf_0[16]
// CHECK-SAME: .entry two_first(
// CHECK-SAME: .entry two_second(
// CHECK: gpu.binary @other [#gpu.object<#nvvm.target<chip = "sm_80">
// CHECK-SAME: .entry other(
// CHECK-NOT: gpu.binary

// APART-LABEL: llvm.func @host(
// APART: gpu.launch_func @small::@k blocks
// APART: gpu.launch_func @big::@k__pdl blocks
// APART: gpu.binary @small
// APART: gpu.binary @big
// APART: gpu.binary @other
// APART: gpu.binary @two

module attributes {gpu.container_module} {
  llvm.func @host(%p: !llvm.ptr) {
    %c1 = llvm.mlir.constant(1 : index) : i64
    gpu.launch_func @small::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%p : !llvm.ptr)
    gpu.launch_func @big::@k__pdl blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%p : !llvm.ptr)
    gpu.launch_func @other::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%p : !llvm.ptr)
    gpu.launch_func @two::@first blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%p : !llvm.ptr)
    gpu.launch_func @two::@second blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) : i64 args(%p : !llvm.ptr)
    llvm.return
  }
  gpu.module @small [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global internal @buf() {addr_space = 3 : i32, alignment = 4 : i64} : !llvm.array<4 x i32>
    llvm.func @ext(i32) -> i32
    llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      %a = llvm.mlir.addressof @buf : !llvm.ptr<3>
      %v = llvm.load %p : !llvm.ptr -> i32
      %w = llvm.call @ext(%v) : (i32) -> i32
      llvm.store volatile %w, %a : i32, !llvm.ptr<3>
      %x = llvm.load volatile %a : !llvm.ptr<3> -> i32
      llvm.store %x, %p : i32, !llvm.ptr
      llvm.return
    }
  }
  gpu.module @big [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global internal @buf() {addr_space = 3 : i32, alignment = 4 : i64} : !llvm.array<16 x i32>
    llvm.func @ext(i32) -> i32
    llvm.func @k__pdl(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      %a = llvm.mlir.addressof @buf : !llvm.ptr<3>
      %v = llvm.load %p : !llvm.ptr -> i32
      %w = llvm.call @ext(%v) : (i32) -> i32
      %u = llvm.add %w, %v : i32
      %t = llvm.mul %u, %w : i32
      llvm.store volatile %t, %a : i32, !llvm.ptr<3>
      %x = llvm.load volatile %a : !llvm.ptr<3> -> i32
      llvm.store %x, %p : i32, !llvm.ptr
      llvm.return
    }
  }
  gpu.module @other [#nvvm.target<chip = "sm_80">] {
    llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
  gpu.module @two [#nvvm.target<chip = "sm_90a">] {
    llvm.func @first(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
    llvm.func @second(%p: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}

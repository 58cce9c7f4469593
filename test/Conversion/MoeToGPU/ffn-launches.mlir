// RUN: moe-opt %s --moe-decompose --moe-fuse --convert-moe-to-gpu | FileCheck %s
// RUN: moe-opt %s --moe-decompose --moe-fuse --moe-lower-to-nvvm | FileCheck %s --check-prefix=PDL
// RUN: moe-opt %s --moe-decompose --moe-fuse "--moe-lower-to-nvvm=programmatic-launch=false" \
// RUN:   | FileCheck %s --check-prefix=NOPDL --implicit-check-not=__pdl

// Kernel launches of a fused moe.ffn with the defaults elide-fills and
// route-dispatch-small: on sm_90a with few rows (T <= 64) a call runs 4
// kernels, issue 11's bound: the route + dispatch cluster kernel, the first
// expert GEMM
// (+ GLU, no fill: only the second GEMM reads its rows), the second (+
// scale, scatter; it zeroes the uncovered rows' targets itself) and the
// combine. Each branch's alternative is what runs otherwise: the route
// kernel and the three dispatch kernels for more rows, the SIMT kernels
// (the second with its fill kernel) when the layout guard fails.

// Through the whole pipeline the two Hopper kernels are the ones launched
// programmatically (programmatic-launch, moe-gpu-programmatic-launch: they
// wait for their predecessor on the device); programmatic-launch=false
// leaves every launch plain.
// PDL-COUNT-2: gpu.launch_func {{.*}}::@ffn_kernel{{(_[0-9]+)?}}__pdl clusters in
// PDL-NOT: gpu.launch_func {{.*}}__pdl
// NOPDL: llvm.func @ffn(

// CHECK-LABEL: func.func @ffn(
// Routing and dispatch: one kernel for few rows, else four.
// CHECK: %[[FEW:[a-z0-9_]+]] = arith.cmpi ule, %{{[a-z0-9_]+}}, %c64 : index
// CHECK: scf.if %[[FEW]] {
// CHECK-COUNT-1: gpu.launch clusters
// CHECK-NOT: gpu.launch
// CHECK: } else {
// CHECK-COUNT-4: gpu.launch blocks
// CHECK-NOT: gpu.launch
// The first GEMM: the Hopper kernel alone, else the SIMT kernel.
// CHECK: scf.if %{{[a-z0-9_]+}} {
// CHECK-COUNT-1: gpu.launch clusters
// CHECK-NOT: gpu.launch
// CHECK: } else {
// CHECK-COUNT-1: gpu.launch blocks
// CHECK-NOT: gpu.launch
// The second GEMM: the Hopper kernel alone, else fill + SIMT.
// CHECK: scf.if %{{[a-z0-9_]+}} {
// CHECK-COUNT-1: gpu.launch clusters
// CHECK-NOT: gpu.launch
// CHECK: } else {
// CHECK-COUNT-2: gpu.launch blocks
// CHECK-NOT: gpu.launch
// CHECK: tensor.expand_shape
// The combine.
// CHECK-COUNT-1: gpu.launch blocks
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @ffn(%x: tensor<?x64xbf16>, %l: tensor<?x8xbf16>, %wu: tensor<8x64x96xbf16>, %wd: tensor<8x48x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {normalize = true}
      : tensor<?x64xbf16>, tensor<?x8xbf16>, tensor<8x64x96xbf16>, tensor<8x48x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

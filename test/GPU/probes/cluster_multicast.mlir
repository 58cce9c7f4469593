// RUN: %llvm_tools_dir/mlir-opt %s --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx86 cubin-format=isa kernel-bare-ptr-calling-convention=1" | FileCheck %s
// Device check: probes_device.py (cubins from build_probes.py); PASS on the
// H200 (bench/NOTES.md v11).
// CHECK: .explicitcluster
// CHECK-SAME: .reqnctapercluster 2, 1, 1
// CHECK-SAME: fence.mbarrier_init.release.cluster
// CHECK-SAME: barrier.cluster.arrive
// CHECK-SAME: barrier.cluster.wait
// CHECK-SAME: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
// 2-CTA cluster, TMA multicast probe: each CTA loads half of a 64 x 64
// bf16 tile (32 rows, SWIZZLE_128B) with multicast_mask 0b11, so both CTAs
// receive the whole tile; each CTA's mbarrier expects all 8192 bytes.
module attributes {gpu.container_module} {
gpu.module @k {
  llvm.mlir.global internal @buf() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<9216 x i8>
  gpu.func @mc(%tmap: !llvm.ptr, %out: !llvm.ptr<1>) kernel attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>, gpu.known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @buf : !llvm.ptr<3>
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c16 = llvm.mlir.constant(16 : i32) : i32
    %c32 = llvm.mlir.constant(32 : i32) : i32
    %c2048 = llvm.mlir.constant(2048 : i32) : i32
    %c4096 = llvm.mlir.constant(4096 : i32) : i32
    %c8192 = llvm.mlir.constant(8192 : i32) : i32
    %ticks = llvm.mlir.constant(10000000 : i32) : i32
    %mask = llvm.mlir.constant(3 : i16) : i16
    %bar = llvm.getelementptr %base[%c8192] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %bid = nvvm.read.ptx.sreg.ctaid.x : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %t0 = llvm.icmp "eq" %tid, %c0 : i32
    scf.if %t0 {
      nvvm.mbarrier.init %bar, %c1 : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
    }
    nvvm.cluster.arrive
    nvvm.cluster.wait
    scf.if %t0 {
      nvvm.mbarrier.arrive.expect_tx %bar, %c8192 : !llvm.ptr<3>, i32
      %off = llvm.mul %rank, %c4096 : i32
      %dst3 = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %dst = llvm.addrspacecast %dst3 : !llvm.ptr<3> to !llvm.ptr<7>
      %row = llvm.mul %rank, %c32 : i32
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %tmap, %bar, box[%c0, %row] multicast_mask = %mask : !llvm.ptr<7>, !llvm.ptr
    }
    nvvm.mbarrier.try_wait.parity %bar, %c0, %ticks : !llvm.ptr<3>, i32, i32
    %obase = llvm.mul %bid, %c8192 : i32
    %lane = llvm.mul %tid, %c16 : i32
    %i0 = llvm.mlir.constant(0 : i32) : i32
    %i4 = llvm.mlir.constant(4 : i32) : i32
    scf.for %i = %i0 to %i4 step %c1 : i32 {
      %a = llvm.mul %i, %c2048 : i32
      %o = llvm.add %a, %lane : i32
      %src = llvm.getelementptr %base[%o] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %v = llvm.load %src {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
      %go = llvm.add %obase, %o : i32
      %g = llvm.getelementptr %out[%go] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i8
      llvm.store %v, %g {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
    }
    nvvm.cluster.arrive
    nvvm.cluster.wait
    gpu.return
  }
}
}

// RUN: %llvm_tools_dir/mlir-opt %s --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx86 cubin-format=isa kernel-bare-ptr-calling-convention=1" | FileCheck %s
// Device check: probes_device.py (cubins from build_probes.py); PASS on the
// H200 (bench/NOTES.md v11).
// CHECK: .explicitcluster
// CHECK-SAME: .reqnctapercluster 2, 1, 1
// CHECK-SAME: fence.mbarrier_init.release.cluster
// CHECK-SAME: barrier.cluster.arrive
// CHECK-SAME: barrier.cluster.wait
// CHECK-SAME: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
// CHECK-SAME: mapa.shared::cluster.u64
// CHECK-SAME: mbarrier.arrive.release.cluster.shared::cluster.b64
// 2-CTA cluster pipeline probe: R rounds through one shared buffer. Each
// round each CTA multicasts its half (32 rows) of a 64 x 64 bf16 tile to
// both CTAs; each CTA waits for the whole tile (full barrier, 8192 bytes),
// copies it out, and releases the buffer on its own and on the peer's
// empty barrier (mapa + mbarrier.arrive.shared::cluster), which the
// producer of each CTA waits for (2 arrivals) before the next multicast.
module attributes {gpu.container_module} {
gpu.module @k {
  llvm.mlir.global internal @buf() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<9216 x i8>
  gpu.func @mc2(%tmap: !llvm.ptr, %out: !llvm.ptr<1>) kernel attributes {nvvm.cluster_dim = array<i32: 2, 1, 1>, gpu.known_block_size = array<i32: 128, 1, 1>} {
    %base = llvm.mlir.addressof @buf : !llvm.ptr<3>
    %c0 = llvm.mlir.constant(0 : i32) : i32
    %c1 = llvm.mlir.constant(1 : i32) : i32
    %c2 = llvm.mlir.constant(2 : i32) : i32
    %c16 = llvm.mlir.constant(16 : i32) : i32
    %c32 = llvm.mlir.constant(32 : i32) : i32
    %c64 = llvm.mlir.constant(64 : i32) : i32
    %c2048 = llvm.mlir.constant(2048 : i32) : i32
    %c4096 = llvm.mlir.constant(4096 : i32) : i32
    %c8192 = llvm.mlir.constant(8192 : i32) : i32
    %c8200 = llvm.mlir.constant(8200 : i32) : i32
    %cR = llvm.mlir.constant(8 : i32) : i32
    %cRB = llvm.mlir.constant(65536 : i32) : i32
    %ticks = llvm.mlir.constant(10000000 : i32) : i32
    %mask = llvm.mlir.constant(3 : i16) : i16
    %full = llvm.getelementptr %base[%c8192] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %empty = llvm.getelementptr %base[%c8200] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %bid = nvvm.read.ptx.sreg.ctaid.x : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %peer = llvm.xor %rank, %c1 : i32
    %t0 = llvm.icmp "eq" %tid, %c0 : i32
    scf.if %t0 {
      nvvm.mbarrier.init %full, %c1 : !llvm.ptr<3>, i32
      nvvm.mbarrier.init %empty, %c2 : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
    }
    nvvm.cluster.arrive
    nvvm.cluster.wait
    %off = llvm.mul %rank, %c4096 : i32
    %dst3 = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %dst = llvm.addrspacecast %dst3 : !llvm.ptr<3> to !llvm.ptr<7>
    %half = llvm.mul %rank, %c32 : i32
    %remoteEmpty = nvvm.mapa %empty, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
    %lane = llvm.mul %tid, %c16 : i32
    %obase = llvm.mul %bid, %cRB : i32
    scf.for %r = %c0 to %cR step %c1 : i32 {
      %par = llvm.and %r, %c1 : i32
      scf.if %t0 {
        %notFirst = llvm.icmp "ugt" %r, %c0 : i32
        scf.if %notFirst {
          %rm1 = llvm.sub %r, %c1 : i32
          %pe = llvm.and %rm1, %c1 : i32
          nvvm.mbarrier.try_wait.parity %empty, %pe, %ticks : !llvm.ptr<3>, i32, i32
        }
        nvvm.mbarrier.arrive.expect_tx %full, %c8192 : !llvm.ptr<3>, i32
        %r64 = llvm.mul %r, %c64 : i32
        %row = llvm.add %r64, %half : i32
        nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %tmap, %full, box[%c0, %row] multicast_mask = %mask : !llvm.ptr<7>, !llvm.ptr
      }
      nvvm.mbarrier.try_wait.parity %full, %par, %ticks : !llvm.ptr<3>, i32, i32
      %rb = llvm.mul %r, %c8192 : i32
      %ob = llvm.add %obase, %rb : i32
      %i0 = llvm.mlir.constant(0 : i32) : i32
      %i4 = llvm.mlir.constant(4 : i32) : i32
      scf.for %i = %i0 to %i4 step %c1 : i32 {
        %a = llvm.mul %i, %c2048 : i32
        %o = llvm.add %a, %lane : i32
        %src = llvm.getelementptr %base[%o] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %v = llvm.load %src {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
        %go = llvm.add %ob, %o : i32
        %g = llvm.getelementptr %out[%go] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i8
        llvm.store %v, %g {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
      }
      nvvm.barrier0
      scf.if %t0 {
        %x = nvvm.mbarrier.arrive %empty : !llvm.ptr<3> -> i64
        nvvm.mbarrier.arrive %remoteEmpty {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
      }
    }
    nvvm.cluster.arrive
    nvvm.cluster.wait
    gpu.return
  }
}
}

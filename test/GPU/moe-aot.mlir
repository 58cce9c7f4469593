// moe-aot links a module of host code and gpu.launch kernels into a shared
// library that needs only the CUDA driver: it defines the function, its C
// interface, the mgpu* runtime and the embedder API, and its only
// non-system dependency is libcuda.so.1.
//
// The upstream passes lower it (moe-aot takes any moe or upstream pass).
// DEFINE: %{pipeline} = --convert-scf-to-cf --gpu-kernel-outlining \
// DEFINE:   '--nvvm-attach-target=chip=sm_90a features=+ptx80 O=3' \
// DEFINE:   --convert-gpu-to-nvvm --gpu-async-region --convert-arith-to-llvm \
// DEFINE:   --convert-index-to-llvm --finalize-memref-to-llvm \
// DEFINE:   --convert-func-to-llvm --convert-cf-to-llvm -gpu-to-llvm \
// DEFINE:   --reconcile-unrealized-casts \
// DEFINE:   '--gpu-module-to-binary=format=bin toolkit=%cuda_toolkit_root'

// RUN: rm -rf %t && mkdir -p %t
// RUN: %moe-aot %s -o %t/libscale.so -v --keep-temps %t/temps \
// RUN:   --pipeline "%{pipeline}" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STEPS
// RUN: llvm-nm -D --defined-only %t/libscale.so \
// RUN:   | FileCheck %s --check-prefix=SYMS
// RUN: llvm-readelf -d %t/libscale.so | grep NEEDED \
// RUN:   | grep -v -E 'lib(c|m|dl|pthread|rt)\.so|ld-linux' \
// RUN:   | FileCheck %s --check-prefix=NEEDED --implicit-check-not='Shared library'
// The kernel module is embedded and loaded from a global constructor.
// RUN: FileCheck %s --check-prefix=IR < %t/temps/moe-aot.ll
// The verifiers run once on the result by default; --verify-each runs them
// after every pass, with the same library as the result.
// RUN: %moe-aot %s -o %t/libscale-verified.so --verify-each \
// RUN:   --pipeline "%{pipeline}"
// RUN: llvm-nm -D --defined-only %t/libscale-verified.so \
// RUN:   | FileCheck %s --check-prefix=SYMS

// STEPS: moe-aot: [pipeline] {{.*}}moe-aot.mlir | convert-scf-to-cf,gpu-kernel-outlining,nvvm-attach-target{chip=sm_90a features=+ptx80 O=3},
// STEPS: moe-aot: [pipeline] done in
// STEPS: moe-aot: [object] {{.*}}moe-aot.o
// STEPS: moe-aot: [object] done in
// STEPS: moe-aot: [link] {{.*}}libmoe_cuda_runtime.a{{.*}} -lcuda
// STEPS: moe-aot: [link] done in
// STEPS: moe-aot: wrote {{.*}}libscale.so

// SYMS-DAG: T _mlir_ciface_scale
// SYMS-DAG: T scale
// SYMS-DAG: T mgpuModuleLoad
// SYMS-DAG: T mgpuModuleLoadJIT
// SYMS-DAG: T mgpuModuleUnload
// SYMS-DAG: T mgpuModuleGetFunction
// SYMS-DAG: T mgpuLaunchKernel
// SYMS-DAG: T mgpuLaunchClusterKernel
// SYMS-DAG: T mgpuStreamCreate
// SYMS-DAG: T mgpuStreamDestroy
// SYMS-DAG: T mgpuStreamSynchronize
// SYMS-DAG: T mgpuStreamWaitEvent
// SYMS-DAG: T mgpuEventCreate
// SYMS-DAG: T mgpuEventDestroy
// SYMS-DAG: T mgpuEventSynchronize
// SYMS-DAG: T mgpuEventRecord
// SYMS-DAG: T mgpuMemAlloc
// SYMS-DAG: T mgpuMemFree
// SYMS-DAG: T mgpuMemcpy
// SYMS-DAG: T mgpuMemset16
// SYMS-DAG: T mgpuMemset32
// SYMS-DAG: T mgpuMemHostRegisterMemRef
// SYMS-DAG: T mgpuMemHostUnregisterMemRef
// SYMS-DAG: T mgpuSetDefaultDevice
// SYMS-DAG: T mgpuTensorMapEncodeTiledMemref
// SYMS-DAG: T moeRuntimeSetStream
// SYMS-DAG: T moeRuntimeGetStream
// SYMS-DAG: T moeRuntimeGetLastError
// SYMS-DAG: T moeRuntimeClearError
// SYMS-DAG: T moeRuntimeSynchronize

// NEEDED: Shared library: [libcuda.so.1]

// IR: @llvm.global_ctors = {{.*}}@scale_kernel_load
// IR-LABEL: define void @scale(
// IR: call ptr @mgpuStreamCreate()
// IR: call ptr @mgpuMemAlloc(
// IR: call void @mgpuLaunchKernel(
// IR: call void @mgpuMemFree(
// IR: call void @mgpuStreamSynchronize(
// IR-LABEL: define internal void @scale_kernel_load()
// IR: call ptr @mgpuModuleLoad(ptr @scale_kernel_binary, i64

// y[i] = 3 * x[i] through a device temporary, 64-bit indices.
func.func @scale(%x: memref<?xf32>, %y: memref<?xf32>)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c127 = arith.constant 127 : index
  %c128 = arith.constant 128 : index
  %three = arith.constant 3.0 : f32
  %n = memref.dim %x, %c0 : memref<?xf32>
  %rounded = arith.addi %n, %c127 : index
  %blocks = arith.divui %rounded, %c128 : index
  %tmp = gpu.alloc (%n) : memref<?xf32>
  gpu.memcpy %tmp, %x : memref<?xf32>, memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %blocks, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    %inside = arith.cmpi ult, %i, %n : index
    scf.if %inside {
      %v = memref.load %tmp[%i] : memref<?xf32>
      %s = arith.mulf %three, %v : f32
      memref.store %s, %y[%i] : memref<?xf32>
    }
    gpu.terminator
  }
  gpu.dealloc %tmp : memref<?xf32>
  return
}

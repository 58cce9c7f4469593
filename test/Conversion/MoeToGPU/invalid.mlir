// Invalid expert-GEMM tile options: the pass reports one error on the
// module (validateGemmTiles) and fails before rewriting anything.
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-m=30" 2>&1 | FileCheck %s --check-prefix=MULT4
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-n=62" 2>&1 | FileCheck %s --check-prefix=MULT4
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-m=0" 2>&1 | FileCheck %s --check-prefix=POS
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-k=-16" 2>&1 | FileCheck %s --check-prefix=POS
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-m=16 tile-n=16" 2>&1 | FileCheck %s --check-prefix=FEW
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-m=256 tile-n=128" 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu="tile-k=65" 2>&1 | FileCheck %s --check-prefix=SMEM
//
// The limits themselves are accepted: 32 and 1024 threads, exactly 48 KiB.
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu="tile-m=16 tile-n=32" | FileCheck %s --check-prefix=OK32
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu="tile-m=128 tile-n=128" | FileCheck %s --check-prefix=OK1024
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu="tile-k=64" | FileCheck %s --check-prefix=OK48K
//
// moe-gpu-device-memory errors.
// RUN: moe-opt %s -split-input-file --moe-gpu-device-memory -verify-diagnostics

// MULT4: error: convert-moe-to-gpu: GEMM tile-m and tile-n must be multiples of 4
// MULT4-NOT: gpu.launch
// POS: error: convert-moe-to-gpu: GEMM tiles must be positive
// POS-NOT: gpu.launch
// FEW: error: convert-moe-to-gpu: GEMM tile gives 16 threads per block; (tile-m/4)*(tile-n/4) must be in [32, 1024]
// MANY: error: convert-moe-to-gpu: GEMM tile gives 2048 threads per block; (tile-m/4)*(tile-n/4) must be in [32, 1024]
// SMEM: error: convert-moe-to-gpu: GEMM tile needs 49920 bytes of shared memory (more than 48 KiB)

// OK32-LABEL: func.func @gemm(
// OK32: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c32{{(_[0-9]+)?}}, {{.*}} workgroup(%{{[a-z0-9_]+}} : memref<16x16xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x32xf32, #gpu.address_space<workgroup>>)
// OK1024-LABEL: func.func @gemm(
// OK1024: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c1024{{(_[0-9]+)?}}, {{.*}} workgroup(%{{[a-z0-9_]+}} : memref<16x128xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<16x128xf32, #gpu.address_space<workgroup>>)
// OK48K-LABEL: func.func @gemm(
// OK48K: gpu.launch {{.*}} workgroup(%{{[a-z0-9_]+}} : memref<64x64xf32, #gpu.address_space<workgroup>>, %{{[a-z0-9_]+}} : memref<64x64xf32, #gpu.address_space<workgroup>>)
func.func @gemm(%a: tensor<?x64xf32>, %w: tensor<8x64x256xf32>, %off: tensor<9xi32>) -> tensor<?x256xf32> {
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf32>, tensor<8x64x256xf32> -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}

// -----

// Host constants become device buffers (device-constants.mlir); mutable or
// uninitialised host globals cannot.
memref.global "private" @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @host_get_global() -> memref<4xf32> {
  // expected-error @below {{moe-gpu-device-memory: host global 'table' used outside a kernel is not a constant with a value; only constants can be put in device memory}}
  %g = memref.get_global @table : memref<4xf32>
  return %g : memref<4xf32>
}

// -----

memref.global "private" @scratch : memref<4xf32> = uninitialized
func.func @host_get_uninitialized() -> memref<4xf32> {
  // expected-error @below {{moe-gpu-device-memory: host global 'scratch' used outside a kernel is not a constant with a value; only constants can be put in device memory}}
  %g = memref.get_global @scratch : memref<4xf32>
  return %g : memref<4xf32>
}

// -----

memref.global "private" constant @strided : memref<4xf32, strided<[2]>> = dense<1.0>
func.func @host_get_strided() -> memref<4xf32, strided<[2]>> {
  // expected-error @below {{moe-gpu-device-memory: host constant 'strided' of type 'memref<4xf32, strided<[2]>>' cannot be put in device memory (only static, identity-layout memrefs of integers, floats or index in the default memory space)}}
  %g = memref.get_global @strided : memref<4xf32, strided<[2]>>
  return %g : memref<4xf32, strided<[2]>>
}

// -----

// gpu.memcpy needs identity layouts on both sides.
func.func @host_copy_strided(%src: memref<4xf32, strided<[2]>>, %dst: memref<4xf32>) {
  // expected-error @below {{moe-gpu-device-memory: copy between non-identity layouts is not supported on the device path}}
  memref.copy %src, %dst : memref<4xf32, strided<[2]>> to memref<4xf32>
  return
}

// -----

func.func @host_copy_strided_target(%src: memref<4xf32>, %dst: memref<4xf32, strided<[1], offset: 2>>) {
  // expected-error @below {{moe-gpu-device-memory: copy between non-identity layouts is not supported on the device path}}
  memref.copy %src, %dst : memref<4xf32> to memref<4xf32, strided<[1], offset: 2>>
  return
}

// -----

// Workgroup memory only exists inside a kernel.
func.func @host_alloc_workgroup() {
  // expected-error @below {{moe-gpu-device-memory: allocation in memory space #gpu.address_space<workgroup> outside a kernel}}
  %a = memref.alloc() : memref<4xf32, #gpu.address_space<workgroup>>
  return
}

// -----

// Constants beyond what a library's data can hold (1.75 GiB in all).
memref.global "private" constant @big : memref<268435456x2xf32> = dense_resource<__elided__>
func.func @host_get_too_big() -> memref<268435456x2xf32> {
  // expected-error @below {{moe-gpu-device-memory: host constant 'big' (2147483648 bytes) makes the module's constants larger than 1879048192 bytes, more than a compiled library can hold; pass such weights as function arguments}}
  %g = memref.get_global @big : memref<268435456x2xf32>
  return %g : memref<268435456x2xf32>
}

// -----

// A runtime entry point the module already declares with another type.
// expected-error @+1 {{redefinition of function 'moeRuntimeUploadConstant' of different type '!llvm.func<ptr (ptr, i64)>' is prohibited}}
llvm.func @moeRuntimeUploadConstant(i32)
memref.global "private" constant @c : memref<8xf32> = dense<1.5>
func.func @host_get_with_clashing_runtime() -> memref<8xf32> {
  %a = memref.get_global @c : memref<8xf32>
  return %a : memref<8xf32>
}

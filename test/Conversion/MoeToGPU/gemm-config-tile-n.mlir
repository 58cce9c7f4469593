// The cost model's rhs tile of the Hopper kernel (Gemm/GemmConfig.cpp):
// 256 rhs columns per block when the GEMM has at least 512 rhs columns
// (2 * N with a GLU epilogue), else 128; wgmma-tile-n overrides it. The
// stage count follows the tile: a 128 x 256 stage is 48 KiB, 4 fit
// (1 KiB barriers + 4 x 48 KiB + 2 x 16 KiB epilogue staging + 1 KiB slack
// = 231424 bytes); an explicit
// wgmma-stages that does not fit the chosen tile is an error on the op
// (validateGemmOptions, which does not know the op, accepts it).
//
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-tile-n=128 | FileCheck %s --check-prefix=TN128
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-stages=4 | FileCheck %s --check-prefix=ST4
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-stages=5 -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=ST5

// 512 rhs columns, rhs [E, N, K].
// AUTO-LABEL: func.func @wide_kmajor(
// AUTO: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231424_i32 {
// AUTO-COUNT-8: nvvm.mbarrier.init
// AUTO-NOT: nvvm.mbarrier.init
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, {{.*}}B[<bf16>, <one>, <col>] :
// AUTO: } else {

// TN128-LABEL: func.func @wide_kmajor(
// TN128: dynamic_shared_memory_size %c231424_i32 {
// TN128: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// ST4-LABEL: func.func @wide_kmajor(
// ST4: dynamic_shared_memory_size %c231424_i32 {
// ST4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>,
func.func @wide_kmajor(%x: tensor<?x64xbf16>, %w: tensor<8x512x64xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 256 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x512x64xbf16> -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// 512 rhs columns, rhs [E, K, N].
// AUTO-LABEL: func.func @wide_mnmajor(
// AUTO: dynamic_shared_memory_size %c231424_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, {{.*}}B[<f16>, <one>, <row>] :
func.func @wide_mnmajor(%x: tensor<?x64xf16>, %w: tensor<8x64x512xf16>, %off: tensor<9xi32>) -> tensor<?x512xf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 256 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf16>, tensor<8x64x512xf16> -> tensor<?x512xf16>
  return %y : tensor<?x512xf16>
}

// -----

// A GLU epilogue counts the rhs columns (2 x 256), not the output columns;
// it is staged too (the same 231424 bytes).
// AUTO-LABEL: func.func @wide_glu(
// AUTO: dynamic_shared_memory_size %c231424_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>,
func.func @wide_glu(%x: tensor<?x64xbf16>, %w: tensor<8x512x64xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 256 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xbf16>, tensor<8x512x64xbf16> -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// 504 rhs columns: the 128-column tile, 6 stages by default, 5 on request.
// AUTO-LABEL: func.func @narrow(
// AUTO: dynamic_shared_memory_size %c231424_i32 {
// AUTO-COUNT-12: nvvm.mbarrier.init
// AUTO-NOT: nvvm.mbarrier.init
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// ST5-LABEL: func.func @narrow(
// ST5: dynamic_shared_memory_size %c198656_i32 {
// ST5-COUNT-10: nvvm.mbarrier.init
// ST5-NOT: nvvm.mbarrier.init
// ST5: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,
func.func @narrow(%x: tensor<?x64xbf16>, %w: tensor<8x504x64xbf16>, %off: tensor<9xi32>) -> tensor<?x504xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x504x64xbf16> -> tensor<?x504xbf16>
  return %y : tensor<?x504xbf16>
}

// The cost model's rhs tile of the Hopper kernel (Gemm/GemmConfig.cpp):
// 256 rhs columns per block when the GEMM has at least 512 rhs columns
// (2 * N with a GLU epilogue), else 128; wgmma-tile-n overrides it. The
// stage count follows the tile: a 128 x 256 stage is 48 KiB, 4 fit
// (1 KiB barriers + 4 x 48 KiB + 2 x 16 KiB epilogue staging + 512 B of
// row-table weights + 1 KiB slack = 231936 bytes); an explicit
// wgmma-stages that does not fit the chosen tile is an error on the op
// (validateGemmOptions, which does not know the op, accepts it).
// Where 256 does not divide the rhs columns, K-major weights take the
// width in [192, 256] (a multiple of 16, of 32 with a concat GLU) that
// wastes the fewest MMA columns, each tile priced 16 columns more: 720 =
// 3 x 240, a concat 672 = 3 x 224; MN-major weights keep 256 (their
// loaders need 64, 128 or 256, and any other explicit width is an error on
// the op, as is one a concat GLU's halves cannot take).
//
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-tile-n=128 | FileCheck %s --check-prefix=TN128
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-stages=4 | FileCheck %s --check-prefix=ST4
// RUN: moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-stages=5 -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=ST5
// RUN: not moe-opt %s -split-input-file --convert-moe-to-gpu=wgmma-tile-n=240 2>&1 | FileCheck %s --check-prefix=TN240

// 512 rhs columns, rhs [E, N, K].
// AUTO-LABEL: func.func @wide_kmajor(
// AUTO: gpu.launch {{.*}} threads({{.*}}) in (%{{[a-z0-9_]+}} = %c384, {{.*}}) dynamic_shared_memory_size %c231936_i32 {
// AUTO-COUNT-8: nvvm.mbarrier.init
// AUTO-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// AUTO-NOT: nvvm.mbarrier.init
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, {{.*}}B[<bf16>, <one>, <col>] :
// AUTO: } else {

// TN128-LABEL: func.func @wide_kmajor(
// TN128: dynamic_shared_memory_size %c231936_i32 {
// TN128: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// ST4-LABEL: func.func @wide_kmajor(
// ST4: dynamic_shared_memory_size %c231936_i32 {
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
// AUTO: dynamic_shared_memory_size %c231936_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, {{.*}}B[<f16>, <one>, <row>] :
func.func @wide_mnmajor(%x: tensor<?x64xf16>, %w: tensor<8x64x512xf16>, %off: tensor<9xi32>) -> tensor<?x512xf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 256 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xf16>, tensor<8x64x512xf16> -> tensor<?x512xf16>
  return %y : tensor<?x512xf16>
}

// -----

// A GLU epilogue counts the rhs columns (2 x 256), not the output columns;
// it is staged too (the same 231936 bytes).
// AUTO-LABEL: func.func @wide_glu(
// AUTO: dynamic_shared_memory_size %c231936_i32 {
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
// AUTO: dynamic_shared_memory_size %c231936_i32 {
// AUTO-COUNT-12: nvvm.mbarrier.init
// AUTO-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// AUTO-NOT: nvvm.mbarrier.init
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// ST5-LABEL: func.func @narrow(
// ST5: dynamic_shared_memory_size %c199168_i32 {
// ST5-COUNT-10: nvvm.mbarrier.init
// ST5-COUNT-2: nvvm.mbarrier.init %{{[a-z0-9_]+}}, %c{{128|256}}_i32
// ST5-NOT: nvvm.mbarrier.init
// ST5: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,
func.func @narrow(%x: tensor<?x64xbf16>, %w: tensor<8x504x64xbf16>, %off: tensor<9xi32>) -> tensor<?x504xbf16> {
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x504x64xbf16> -> tensor<?x504xbf16>
  return %y : tensor<?x504xbf16>
}

// -----

// 720 rhs columns, rhs [E, N, K]: three 240-column tiles (stage 46 KiB,
// 4 stages: 1 KiB + 4 x 46 KiB + 32 KiB + 512 B + 1 KiB = 223744 bytes).
// AUTO-LABEL: func.func @uneven_kmajor(
// AUTO: dynamic_shared_memory_size %c223744_i32 {
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 240, k = 16>,

// TN128-LABEL: func.func @uneven_kmajor(
// TN128: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>,

// TN240-LABEL: func.func @uneven_kmajor(
// TN240: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 240, k = 16>,
func.func @uneven_kmajor(%x: tensor<?x64xbf16>, %w: tensor<8x720x64xbf16>, %off: tensor<9xi32>) -> tensor<?x720xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 240 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<8x720x64xbf16> -> tensor<?x720xbf16>
  return %y : tensor<?x720xbf16>
}

// -----

// 720 rhs columns, rhs [E, K, N]: 256 (an explicit 240 is an error).
// AUTO-LABEL: func.func @uneven_mnmajor(
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>,
// TN240: error: 'moe.expert_gemm' op wgmma-tile-n 240 cannot tile this op's weights (transpose_rhs = false needs 64, 128 or 256)
func.func @uneven_mnmajor(%x: tensor<?x64xbf16>, %w: tensor<8x64x720xbf16>, %off: tensor<9xi32>) -> tensor<?x720xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 256 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) : tensor<?x64xbf16>, tensor<8x64x720xbf16> -> tensor<?x720xbf16>
  return %y : tensor<?x720xbf16>
}

// -----

// A concat GLU over 672 rhs columns: three tiles of 224 (halves of 112);
// 240 would split a half across the loader's 16-row groups: an error.
// AUTO-LABEL: func.func @uneven_concat(
// AUTO: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 224, k = 16>,
// TN240: error: 'moe.expert_gemm' op wgmma-tile-n 240 cannot tile this op's weights (a concat GLU needs a multiple of 32)
func.func @uneven_concat(%x: tensor<?x64xbf16>, %w: tensor<8x672x64xbf16>, %off: tensor<9xi32>) -> tensor<?x336xbf16> {
  // expected-error @+2 {{'moe.expert_gemm' op wgmma-stages 5 does not fit the 128 x 224 tile in shared memory (at most 4 stages)}}
  // expected-error @+1 {{failed to legalize operation 'moe.expert_gemm'}}
  %y = moe.expert_gemm %x, %w offsets(%off : tensor<9xi32>) {transpose_rhs = true, activation = #moe.activation<silu>, layout = #moe.glu_layout<concat>} : tensor<?x64xbf16>, tensor<8x672x64xbf16> -> tensor<?x336xbf16>
  return %y : tensor<?x336xbf16>
}

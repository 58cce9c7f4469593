// RUN: moe-opt %s -split-input-file -verify-diagnostics

// Low-precision expert weights (weight_format, scale_fmt, the weight
// scales): one broken rule per chunk, every diagnostic of
// verifyWeightFormat and of the operand counts that depend on the format,
// on moe.grouped_matmul, moe.expert_gemm and moe.ffn.

func.func @fp8_missing_scales(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xf8E4M3FN>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 4 or 5 operands (lhs, rhs, offsets, [bias], rhs_scale) with weight_format fp8_block, got 3}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x192x256xf8E4M3FN> -> tensor<?x192xf32>
  return
}

// -----

func.func @plain_with_scales(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xbf16>, %s: tensor<4x2x2xf32>, %b: tensor<4x192xbf16>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 3 or 4 operands (lhs, rhs, offsets, [bias]) with weight_format plain, got 5}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<4x192xbf16>) scales(%s : tensor<4x2x2xf32>) {transpose_rhs = true} : tensor<?x256xbf16>, tensor<4x192x256xbf16> -> tensor<?x192xf32>
  return
}

// -----

func.func @plain_fp8_weights(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xf8E4M3FN>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs' element type 'bf16' (as 'lhs'), got 'f8E4M3FN'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true} : tensor<?x256xbf16>, tensor<4x192x256xf8E4M3FN> -> tensor<?x192xf32>
  return
}

// -----

func.func @ue8m0_with_mxfp4(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected scale_fmt f32 with weight_format mxfp4 (activation scales are fp8_block's)}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>, scale_fmt = #moe.scale_fmt<ue8m0>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @fp8_not_transposed(%a: tensor<?x256xbf16>, %w: tensor<4x256x192xf8E4M3FN>, %s: tensor<4x2x2xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected weight_format fp8_block weights as E x N x K, K contiguous (transposed, the checkpoints' layout)}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xf32>) {weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x256x192xf8E4M3FN> -> tensor<?x192xf32>
  return
}

// -----

func.func @fp8_bf16_weights(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xbf16>, %s: tensor<4x2x2xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs' element type 'f8E4M3FN' with weight_format fp8_block, got 'bf16'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x192x256xbf16> -> tensor<?x192xf32>
  return
}

// -----

func.func @fp8_k_mismatch(%a: tensor<?x256xbf16>, %w: tensor<4x192x128xf8E4M3FN>, %s: tensor<4x2x2xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected dimension 2 of 'rhs' to be K = 256 with weight_format fp8_block, got 128}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x192x128xf8E4M3FN> -> tensor<?x192xf32>
  return
}

// -----

// ceil(N / 128) x ceil(K / 128) blocks: N = 192 -> 2, K = 200 -> 2.
func.func @fp8_scale_shape(%a: tensor<?x200xbf16>, %w: tensor<4x192x200xf8E4M3FN>, %s: tensor<4x2x1xf32>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs_scale' to be 'tensor<4x2x2xf32>' (E x ceil(N/128) x ceil(K/128)) with weight_format fp8_block, got 'tensor<4x2x1xf32>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x1xf32>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x200xbf16>, tensor<4x192x200xf8E4M3FN> -> tensor<?x192xf32>
  return
}

// -----

func.func @fp8_scale_type(%a: tensor<?x256xbf16>, %w: tensor<4x192x256xf8E4M3FN>, %s: tensor<4x2x2xbf16>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs_scale' to be 'tensor<4x2x2xf32>' (E x ceil(N/128) x ceil(K/128)) with weight_format fp8_block, got 'tensor<4x2x2xbf16>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x2x2xbf16>) {transpose_rhs = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<4x192x256xf8E4M3FN> -> tensor<?x192xf32>
  return
}

// -----

func.func @mxfp4_k_not_32(%a: tensor<?x48xbf16>, %w: tensor<4x48x24xi8>, %s: tensor<4x48x1xf8E8M0FNU>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected K a multiple of 32 with weight_format mxfp4 (32-value blocks), got 48}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x1xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x48xbf16>, tensor<4x48x24xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @mxfp4_unpacked(%a: tensor<?x64xbf16>, %w: tensor<4x48x64xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected dimension 2 of 'rhs' to be K/2 = 32 with weight_format mxfp4, got 64}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x64xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @mxfp4_fp8_weights(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xf8E4M3FN>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs' element type 'i8' with weight_format mxfp4, got 'f8E4M3FN'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xf8E4M3FN> -> tensor<?x48xbf16>
  return
}

// -----

func.func @mxfp4_u8_scales(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xi8>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'rhs_scale' to be 'tensor<4x48x2xf8E8M0FNU>' (E x N x K/32) with weight_format mxfp4, got 'tensor<4x48x2xi8>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xi8>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @bias_rank(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %s: tensor<4x48x2xf8E8M0FNU>, %b: tensor<48xbf16>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected 'bias' to be a 2-D tensor (E x N), got 'tensor<48xbf16>'}}
  %r = moe.grouped_matmul %a, %w offsets(%off : tensor<5xi32>) bias(%b : tensor<48xbf16>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @expert_gemm_plain_with_scales(%a: tensor<?x64xbf16>, %w: tensor<4x48x64xbf16>, %s: tensor<4x48x2xf8E8M0FNU>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected no 'rhs_scale' with weight_format plain}}
  %r = moe.expert_gemm %a, %w offsets(%off : tensor<5xi32>) scales(%s : tensor<4x48x2xf8E8M0FNU>) {transpose_rhs = true} : tensor<?x64xbf16>, tensor<4x48x64xbf16> -> tensor<?x48xbf16>
  return
}

// -----

func.func @expert_gemm_missing_scales(%a: tensor<?x64xbf16>, %w: tensor<4x48x32xi8>, %off: tensor<5xi32>) {
  // expected-error @+1 {{'moe.expert_gemm' op expected 'rhs_scale' with weight_format mxfp4}}
  %r = moe.expert_gemm %a, %w offsets(%off : tensor<5xi32>) {transpose_rhs = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<4x48x32xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @ffn_missing_scales(%x: tensor<?x64xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x64x32xi8>, %wd: tensor<4x64x16xi8>) {
  // expected-error @+1 {{'moe.ffn' op expected 6 or 7 operands (x, logits, w_up, w_down, [bias], w_up_scale, w_down_scale) with expert_bias = false and weight_format mxfp4, got 4}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = interleaved {transpose_weights = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<?x4xf32>, tensor<4x64x32xi8>, tensor<4x64x16xi8> -> tensor<?x64xbf16>
  return
}

// -----

func.func @ffn_not_transposed(%x: tensor<?x256xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x256x256xf8E4M3FN>, %wd: tensor<4x128x256xf8E4M3FN>, %su: tensor<4x2x2xf32>, %sd: tensor<4x2x1xf32>) {
  // expected-error @+1 {{'moe.ffn' op expected transpose_weights with weight_format fp8_block (the checkpoints' E x N x K layout)}}
  %y = moe.ffn %x, %l, %wu, %wd scales(%su, %sd : tensor<4x2x2xf32>, tensor<4x2x1xf32>) k = 2 scoring = softmax activation = silu layout = concat {weight_format = #moe.weight_format<fp8_block>} : tensor<?x256xbf16>, tensor<?x4xf32>, tensor<4x256x256xf8E4M3FN>, tensor<4x128x256xf8E4M3FN> -> tensor<?x256xbf16>
  return
}

// -----

func.func @ffn_mxfp4_h_not_32(%x: tensor<?x48xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x64x24xi8>, %wd: tensor<4x48x16xi8>, %su: tensor<4x64x1xf8E8M0FNU>, %sd: tensor<4x48x1xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.ffn' op expected K a multiple of 32 with weight_format mxfp4 (32-value blocks), got 48}}
  %y = moe.ffn %x, %l, %wu, %wd scales(%su, %sd : tensor<4x64x1xf8E8M0FNU>, tensor<4x48x1xf8E8M0FNU>) k = 2 scoring = softmax activation = silu layout = interleaved {transpose_weights = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x48xbf16>, tensor<?x4xf32>, tensor<4x64x24xi8>, tensor<4x48x16xi8> -> tensor<?x48xbf16>
  return
}

// -----

func.func @ffn_mxfp4_down_unpacked(%x: tensor<?x64xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x64x32xi8>, %wd: tensor<4x64x32xi8>, %su: tensor<4x64x2xf8E8M0FNU>, %sd: tensor<4x64x1xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down' to be E x H x I/2 = 4x64x16, got 'tensor<4x64x32xi8>'}}
  %y = moe.ffn %x, %l, %wu, %wd scales(%su, %sd : tensor<4x64x2xf8E8M0FNU>, tensor<4x64x1xf8E8M0FNU>) k = 2 scoring = softmax activation = silu layout = interleaved {transpose_weights = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<?x4xf32>, tensor<4x64x32xi8>, tensor<4x64x32xi8> -> tensor<?x64xbf16>
  return
}

// -----

func.func @ffn_down_scale_shape(%x: tensor<?x64xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x64x32xi8>, %wd: tensor<4x64x16xi8>, %su: tensor<4x64x2xf8E8M0FNU>, %sd: tensor<4x64x2xf8E8M0FNU>) {
  // expected-error @+1 {{'moe.ffn' op expected 'w_down_scale' to be 'tensor<4x64x1xf8E8M0FNU>' (E x N x K/32) with weight_format mxfp4, got 'tensor<4x64x2xf8E8M0FNU>'}}
  %y = moe.ffn %x, %l, %wu, %wd scales(%su, %sd : tensor<4x64x2xf8E8M0FNU>, tensor<4x64x2xf8E8M0FNU>) k = 2 scoring = softmax activation = silu layout = interleaved {transpose_weights = true, weight_format = #moe.weight_format<mxfp4>} : tensor<?x64xbf16>, tensor<?x4xf32>, tensor<4x64x32xi8>, tensor<4x64x16xi8> -> tensor<?x64xbf16>
  return
}

// -----

func.func @ffn_up_scale_fmt(%x: tensor<?x256xbf16>, %l: tensor<?x4xf32>, %wu: tensor<4x256x256xbf16>, %wd: tensor<4x256x128xbf16>) {
  // expected-error @+1 {{'moe.ffn' op expected scale_fmt f32 with weight_format plain (activation scales are fp8_block's)}}
  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax activation = silu layout = concat {transpose_weights = true, scale_fmt = #moe.scale_fmt<ue8m0>} : tensor<?x256xbf16>, tensor<?x4xf32>, tensor<4x256x256xbf16>, tensor<4x256x128xbf16> -> tensor<?x256xbf16>
  return
}

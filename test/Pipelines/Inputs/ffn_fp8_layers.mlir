// RUN: moe-opt %s --moe-decompose --moe-fuse > /dev/null

// The FP8 block layers of test/Pipelines/ptxas-lowprec.test: Qwen3-30B-A3B-FP8
// and DeepSeek-V3-FP8 (the moe_mlir presets' moe.ffn, dynamic T).

func.func @qwen3(%x: tensor<?x2048xbf16>, %logits: tensor<?x128xbf16>, %w_up: tensor<128x1536x2048xf8E4M3FN>, %w_down: tensor<128x2048x768xf8E4M3FN>, %s_up: tensor<128x12x16xf32>, %s_down: tensor<128x16x6xf32>) -> tensor<?x2048xbf16> {
  %0 = moe.ffn %x, %logits, %w_up, %w_down scales(%s_up, %s_down : tensor<128x12x16xf32>, tensor<128x16x6xf32>) k = 8 scoring = softmax activation = silu layout = concat {normalize = true, transpose_weights = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x2048xbf16>, tensor<?x128xbf16>, tensor<128x1536x2048xf8E4M3FN>, tensor<128x2048x768xf8E4M3FN> -> tensor<?x2048xbf16>
  return %0 : tensor<?x2048xbf16>
}

func.func @deepseek(%x: tensor<?x7168xbf16>, %logits: tensor<?x256xf32>, %w_up: tensor<256x4096x7168xf8E4M3FN>, %w_down: tensor<256x7168x2048xf8E4M3FN>, %bias: tensor<256xf32>, %s_up: tensor<256x32x56xf32>, %s_down: tensor<256x56x16xf32>) -> tensor<?x7168xbf16> {
  %0 = moe.ffn %x, %logits, %w_up, %w_down bias(%bias : tensor<256xf32>) scales(%s_up, %s_down : tensor<256x32x56xf32>, tensor<256x56x16xf32>) k = 8 scoring = sigmoid activation = silu layout = concat {group_score = #moe.group_score<top2_sum>, n_group = 8 : i64, normalize = true, scaling = 2.500000e+00 : f32, topk_group = 4 : i64, transpose_weights = true, weight_format = #moe.weight_format<fp8_block>} : tensor<?x7168xbf16>, tensor<?x256xf32>, tensor<256x4096x7168xf8E4M3FN>, tensor<256x7168x2048xf8E4M3FN> -> tensor<?x7168xbf16>
  return %0 : tensor<?x7168xbf16>
}

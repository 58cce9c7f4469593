// RUN: moe-opt %s --moe-decompose --moe-fuse > /dev/null

// The MXFP4 layer of test/Pipelines/ptxas-mxfp4-hopper.test (codes in the
// mxfp4_hopper order): gpt-oss-120b with
// MXFP4 experts (the moe_mlir preset's moe.ffn, dynamic T).

module {
  func.func @gptoss(%arg0: tensor<?x2880xbf16>, %arg1: tensor<?x128xbf16>, %arg2: tensor<128x5760x1440xi8>, %arg3: tensor<128x2880x1440xi8>, %arg4: tensor<128x5760xbf16>, %arg5: tensor<128x2880xbf16>, %arg6: tensor<128x5760x90xf8E8M0FNU>, %arg7: tensor<128x2880x90xf8E8M0FNU>) -> tensor<?x2880xbf16> {
    %0 = moe.ffn %arg0, %arg1, %arg2, %arg3 expert_bias(%arg4, %arg5 : tensor<128x5760xbf16>, tensor<128x2880xbf16>) scales(%arg6, %arg7 : tensor<128x5760x90xf8E8M0FNU>, tensor<128x2880x90xf8E8M0FNU>)  k = 4 scoring = softmax activation = silu layout = interleaved {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32, normalize = true, transpose_weights = true, up_bias = 1.000000e+00 : f32, weight_format = #moe.weight_format<mxfp4_hopper>} : tensor<?x2880xbf16>, tensor<?x128xbf16>, tensor<128x5760x1440xi8>, tensor<128x2880x1440xi8> -> tensor<?x2880xbf16>
    return %0 : tensor<?x2880xbf16>
  }
}


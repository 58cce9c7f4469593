// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | FileCheck %s
//
// moe.glu: act(gate) * (up + up_bias), computed in f32. concat: gate =
// first half, up = second half; interleaved: gate = even columns, up = odd.
// silu(x) = x * sigmoid(alpha * x); gelu = 0.5 x (1 + erf(x / sqrt 2));
// gelu_tanh = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). limit clamps
// the gate to <= limit and up to [-limit, limit].
//
// Expected values were computed from the ops' definitions (docs/) with
// numpy (float64, then rounded to the result type); a value within a
// few f32 ulps of a printing boundary accepts either rendering.

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefShapeF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printNewline()

func.func @print_bf16_2d(%t: tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xbf16>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xbf16>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xbf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: bf16, %b: f32):
    %x = arith.extf %a : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x?xf32>
  %m = bufferization.to_buffer %w : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print_f16_2d(%t: tensor<?x?xf16>) {
  %c0 = arith.constant 0 : index
  %n0 = tensor.dim %t, %c0 : tensor<?x?xf16>
  %c1 = arith.constant 1 : index
  %n1 = tensor.dim %t, %c1 : tensor<?x?xf16>
  %e = tensor.empty(%n0, %n1) : tensor<?x?xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<?x?xf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f16, %b: f32):
    %x = arith.extf %a : f16 to f32
    linalg.yield %x : f32
  } -> tensor<?x?xf32>
  %m = bufferization.to_buffer %w : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print_f32_2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @shape_f32_2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefShapeF32(%u) : (memref<*xf32>) -> ()
  call @printNewline() : () -> ()
  return
}

func.func @main() {

  // silu, concat.
  %c1 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d2 = tensor.cast %c1 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu3 = moe.glu %d2 silu concat : tensor<?x6xf32> -> tensor<?x3xf32>
  %p4 = tensor.cast %glu3 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p4) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.205228|\-0\.205229)}},   {{(\-0\.0778073|\-0\.0778074|\-0\.0778075|\-0\.0778076)}},   {{(2\.20199|2\.202)}}],
  // CHECK-NEXT:  [{{(\-2\.85772|\-2\.85773)}},   {{(\-0\.953621|\-0\.953622|\-0\.953623|\-0\.953624|\-0\.953625)}},   {{(\-0\.0332005|\-0\.0332006|\-0\.0332007)}}]]

  // silu, interleaved.
  %c5 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d6 = tensor.cast %c5 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu7 = moe.glu %d6 silu interleaved : tensor<?x6xf32> -> tensor<?x3xf32>
  %p8 = tensor.cast %glu7 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p8) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}-0.136819,   {{(1\.32119|1\.3212)}},   -0.13682],
  // CHECK-NEXT:  [{{(\-5\.71543|\-5\.71544|\-5\.71545|\-5\.71546)}},   {{(\-0\.066401|\-0\.0664011|\-0\.0664012|\-0\.0664013)}},   {{(\-1\.96402|\-1\.96403)}}]]

  // gelu, concat.
  %c9 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d10 = tensor.cast %c9 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu11 = moe.glu %d10 gelu concat : tensor<?x6xf32> -> tensor<?x3xf32>
  %p12 = tensor.cast %glu11 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p12) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.0751579|\-0\.075158|\-0\.0751581|\-0\.0751582|\-0\.0751583)}},   {{(\-0\.0864326|\-0\.0864327|\-0\.0864328|\-0\.0864329|\-0\.086433)}},   {{(2\.44312|2\.44313)}}],
  // CHECK-NEXT:  [{{(\-2\.99594|\-2\.99595|\-2\.99596)}},   {{(\-0\.182|\-0\.182001|\-0\.182002)}},   {{(\-0\.0343586|\-0\.0343587)}}]]

  // gelu, interleaved.
  %c13 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d14 = tensor.cast %c13 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu15 = moe.glu %d14 gelu interleaved : tensor<?x6xf32> -> tensor<?x3xf32>
  %p16 = tensor.cast %glu15 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p16) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.0501053|\-0\.0501054|\-0\.0501055)}},   {{(1\.46587|1\.46588)}},   {{(\-0\.125404|\-0\.125405)}}],
  // CHECK-NEXT:  [{{(\-5\.99189|\-5\.9919|\-5\.99191)}},   {{(\-0\.0687171|\-0\.0687172|\-0\.0687173|\-0\.0687174)}},   {{(\-1\.99993|\-1\.99994)}}]]

  // gelu_tanh, concat.
  %c17 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d18 = tensor.cast %c17 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu19 = moe.glu %d18 gelu_tanh concat : tensor<?x6xf32> -> tensor<?x3xf32>
  %p20 = tensor.cast %glu19 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p20) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.0753212|\-0\.0753213|\-0\.0753214|\-0\.0753215)}},   {{(\-0\.0864283|\-0\.0864284|\-0\.0864285|\-0\.0864286|\-0\.0864287)}},   {{(2\.44324|2\.44325)}}],
  // CHECK-NEXT:  [{{(\-2\.99636|\-2\.99637)}},   {{(\-0\.181608|\-0\.181609|\-0\.18161)}},   {{(\-0\.0343585|\-0\.0343586|\-0\.0343587)}}]]

  // gelu_tanh, interleaved.
  %c21 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d22 = tensor.cast %c21 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu23 = moe.glu %d22 gelu_tanh interleaved : tensor<?x6xf32> -> tensor<?x3xf32>
  %p24 = tensor.cast %glu23 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p24) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.0502141|\-0\.0502142|\-0\.0502143)}},   1.46595,   -0.125406],
  // CHECK-NEXT:  [{{(\-5\.99271|\-5\.99272|\-5\.99273|\-5\.99274)}},   {{(\-0\.0687171|\-0\.0687172|\-0\.0687173)}},   {{(\-1\.99996|\-1\.99997)}}]]

  // gpt-oss SwiGLU: silu, interleaved, alpha 1.702, limit 7, up_bias 1.
  // Gate 10 clamps to 7, up -9 to -7, up 8 to 7, up 7.5 to 7, up -7.25 to -7;
  // gate -8 is not clamped from below.
  %c25 = arith.constant dense<[[10.0, -9.0, -8.0, 8.0, 3.0, 7.5], [6.5, 0.5, -0.75, -6.0, 7.0, -7.25]]> : tensor<2x6xf32>
  %d26 = tensor.cast %c25 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu27 = moe.glu %d26 silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x6xf32> -> tensor<?x3xf32>
  %p28 = tensor.cast %glu27 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p28) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-41\.9996|\-41\.9997|\-41\.9998)}},   {{(\-7\.81313e\-05|\-7\.81314e\-05|\-7\.81315e\-05|\-7\.81316e\-05)}},   {{(23\.8554|23\.8555)}}],
  // CHECK-NEXT:  [{{(9\.74983|9\.74984|9\.74985|9\.74986|9\.74987)}},   {{(0\.818048|0\.818049|0\.81805|0\.818051)}},   {{(\-41\.9996|\-41\.9997|\-41\.9998)}}]]

  // silu concat with alpha 1.702 only (no clamp).
  %c29 = arith.constant dense<[[10.0, -9.0, -8.0, 8.0, 3.0, 7.5], [6.5, 0.5, -0.75, -6.0, 7.0, -7.25]]> : tensor<2x6xf32>
  %d30 = tensor.cast %c29 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu31 = moe.glu %d30 silu concat {alpha = 1.702 : f32} : tensor<?x6xf32> -> tensor<?x3xf32>
  %p32 = tensor.cast %glu31 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p32) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(79\.9998|79\.9999|80|80\.0001|80\.0002)}},   {{(\-6\.00952e\-06|\-6\.00953e\-06|\-6\.00954e\-06)}},   {{(\-7\.32481e\-05|\-7\.32482e\-05|\-7\.32483e\-05|\-7\.32484e\-05)}}],
  // CHECK-NEXT:  [{{(\-38\.9993|\-38\.9994|\-38\.9995)}},   {{(2\.45271|2\.45272)}},   1.18617]]

  // gelu, concat, limit 1, up_bias -0.5: gate 2 and 3 clamp to 1, up 1.25
  // and 4 to 1, up -1 stays.
  %c33 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d34 = tensor.cast %c33 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu35 = moe.glu %d34 gelu concat {limit = 1.0 : f32, up_bias = -0.5 : f32} : tensor<?x6xf32> -> tensor<?x3xf32>
  %p36 = tensor.cast %glu35 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p36) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.0250526|\-0\.0250527|\-0\.0250528)}},   {{(\-0\.259298|\-0\.259299)}},   {{(0\.420672|0\.420673)}}],
  // CHECK-NEXT:  [{{(\-1\.26201|\-1\.26202)}},   {{(\-0\.02275|\-0\.0227501|\-0\.0227502|\-0\.0227503)}},   {{(\-0\.0687171|\-0\.0687172|\-0\.0687173|\-0\.0687174)}}]]

  // gelu_tanh, interleaved, up_bias 0.25.
  %c37 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf32>
  %d38 = tensor.cast %c37 : tensor<2x6xf32> to tensor<?x6xf32>
  %glu39 = moe.glu %d38 gelu_tanh interleaved {up_bias = 0.25 : f32} : tensor<?x6xf32> -> tensor<?x3xf32>
  %p40 = tensor.cast %glu39 : tensor<?x3xf32> to tensor<?x?xf32>
  call @print_f32_2d(%p40) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}{{(\-0\.0753212|\-0\.0753213|\-0\.0753214|\-0\.0753215)}},   {{(1\.95459|1\.9546)}},   -0.150487],
  // CHECK-NEXT:  [{{(\-5\.24362|\-5\.24363|\-5\.24364|\-5\.24365)}},   {{(\-0\.0515378|\-0\.0515379|\-0\.051538)}},   {{(\-0\.99998|\-0\.999981|\-0\.999982|\-0\.999983|\-0\.999984)}}]]

  // bf16 silu concat (computed in f32, rounded once).
  %c41 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xbf16>
  %d42 = tensor.cast %c41 : tensor<2x6xbf16> to tensor<?x6xbf16>
  %glu43 = moe.glu %d42 silu concat : tensor<?x6xbf16> -> tensor<?x3xbf16>
  %p44 = tensor.cast %glu43 : tensor<?x3xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p44) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}-0.205078,   -0.0776367,   2.20312],
  // CHECK-NEXT:  [-2.85938,   -0.953125,   -0.0332031]]

  // bf16 gpt-oss SwiGLU.
  %c45 = arith.constant dense<[[10.0, -9.0, -8.0, 8.0, 3.0, 7.5], [6.5, 0.5, -0.75, -6.0, 7.0, -7.25]]> : tensor<2x6xbf16>
  %d46 = tensor.cast %c45 : tensor<2x6xbf16> to tensor<?x6xbf16>
  %glu47 = moe.glu %d46 silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x6xbf16> -> tensor<?x3xbf16>
  %p48 = tensor.cast %glu47 : tensor<?x3xbf16> to tensor<?x?xbf16>
  call @print_bf16_2d(%p48) : (tensor<?x?xbf16>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}-42,   -7.82013e-05,   23.875],
  // CHECK-NEXT:  [9.75,   0.816406,   -42]]

  // f16 gelu_tanh interleaved.
  %c49 = arith.constant dense<[[-1.5, 0.5, 2.0, 0.75, -0.25, 1.25], [3.0, -2.0, 0.125, -1.0, 4.0, -0.5]]> : tensor<2x6xf16>
  %d50 = tensor.cast %c49 : tensor<2x6xf16> to tensor<?x6xf16>
  %glu51 = moe.glu %d50 gelu_tanh interleaved : tensor<?x6xf16> -> tensor<?x3xf16>
  %p52 = tensor.cast %glu51 : tensor<?x3xf16> to tensor<?x?xf16>
  call @print_f16_2d(%p52) : (tensor<?x?xf16>) -> ()
  // CHECK: sizes = [2, 3] strides = [3, 1] data =
  // CHECK-NEXT: {{\[\[}}-0.0502014,   1.46582,   -0.125366],
  // CHECK-NEXT:  [-5.99219,   -0.0687256,   -2]]

  // M = 0.
  %c53 = arith.constant dense<> : tensor<0x6xf32>
  %d54 = tensor.cast %c53 : tensor<0x6xf32> to tensor<?x6xf32>
  %glu55 = moe.glu %d54 silu interleaved {alpha = 1.702 : f32, limit = 7.0 : f32, up_bias = 1.0 : f32} : tensor<?x6xf32> -> tensor<?x3xf32>
  %p56 = tensor.cast %glu55 : tensor<?x3xf32> to tensor<?x?xf32>
  call @shape_f32_2d(%p56) : (tensor<?x?xf32>) -> ()
  // CHECK: rank = 2 offset = 0 sizes = [0, 3] strides = [3, 1]{{$}}
  return
}

// RUN: moe-opt %s --moe-shape-checks --split-input-file | FileCheck %s

// moe.ffn: rows of x, logits and the result are T; T * k bounded by int32.
// CHECK-LABEL: func.func @ffn
// CHECK-SAME: moe.shape_checks = [
// CHECK-SAME: kind = "nonneg", lhs = array<i64: 0, 0>
// CHECK-SAME: kind = "nonneg", lhs = array<i64: 1, 0>
// CHECK-SAME: kind = "nonneg", lhs = array<i64: 4, 0>, message = "@ffn: dimension 0 of result 0 (the out-parameter, argument 4) is {0}, a negative size", num = 1 : i64, output
// CHECK-SAME: kind = "eq", lhs = array<i64: 1, 0>, message = "@ffn: dimension 0 of argument 1 ('logits' of moe.ffn at {{.*}}moe-shape-checks.mlir:{{[0-9]+}}:8) is {0}, but dimension 0 of argument 0 ('x' of moe.ffn at {{.*}}) is {1}: they must be equal (T)", num = 1 : i64, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 4, 0>, {{.*}} output, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "max", lhs = array<i64: 0, 0>, message = "{{.*}} more than {1}: T * k would not fit the int32 indices", num = 1 : i64, value = 1073741823 : i64
func.func @ffn(%x: tensor<?x16xf32>, %logits: tensor<?x4xf32>,
               %w_up: tensor<4x16x32xf32>, %w_down: tensor<4x16x16xf32>)
    -> tensor<?x16xf32> {
  %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat
      : tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>,
        tensor<4x16x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// A static size on one side: the dynamic side is checked against it.
// CHECK-LABEL: func.func @static_logits
// CHECK-SAME: kind = "const", lhs = array<i64: 0, 0>, message = "@static_logits: dimension 0 of argument 0 ('x' of moe.ffn {{.*}}) is {0}, but must be {1} (T)", num = 1 : i64, value = 6 : i64
func.func @static_logits(%x: tensor<?x16xf32>, %logits: tensor<6x4xf32>,
                         %w_up: tensor<4x16x32xf32>, %w_down: tensor<4x16x16xf32>)
    -> tensor<?x16xf32> {
  %y = moe.ffn %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat
      : tensor<?x16xf32>, tensor<6x4xf32>, tensor<4x16x32xf32>,
        tensor<4x16x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Ratios through the chain (E = 4, k = 2): the cumsum argument has E * T
// elements (it is added to moe.cumsum's), the scattered rows are T * k
// (get_indices of the ids).
// CHECK-LABEL: func.func @chain
// CHECK-SAME: kind = "eq", lhs = array<i64: 1, 0>, message = "@chain: dimension 0 of argument 1 ('indices' of moe.cumsum {{.*}}) is {0}, but dimension 0 of argument 0 is {1}: the first must be 1/4 of the second", num = 1 : i64, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 2, 0>, message = "@chain: dimension 0 of argument 2 ('input' of moe.scatter {{.*}}) is {0}, but dimension 0 of argument 0 is {1}: the first must be 1/2 of the second", num = 1 : i64, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "max", lhs = array<i64: 0, 0>, {{.*}}E * T would not fit the int32 indices", num = 1 : i64, value = 2147483647
// CHECK-SAME: kind = "max", lhs = array<i64: 0, 0>, {{.*}}T * k would not fit the int32 indices", num = 1 : i64, value = 4294967294
func.func @chain(%cs_in: tensor<?xi32>, %ids: tensor<?x2xi32>,
                 %rows: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %cs = moe.cumsum %ids num_experts = 4 : tensor<?x2xi32> -> tensor<?xi32>
  %cs2 = tensor.cast %cs_in : tensor<?xi32> to tensor<?xi32>
  %sum = arith.addi %cs, %cs2 : tensor<?xi32>
  %rev, %tok = moe.get_indices %sum, %ids
      : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  %s = moe.scatter %rows[%rev] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  return %s : tensor<?x16xf32>
}

// -----

// get_indices on arguments: the cumsum is a multiple of T; get_indptr's a
// multiple of E.
// CHECK-LABEL: func.func @multiples
// CHECK-SAME: kind = "multiple", lhs = array<i64: 0, 0>, message = "@multiples: dimension 0 of argument 0 ('cumsum' of moe.get_indices {{.*}}) is {0}, not a multiple of dimension 0 of argument 1 ('indices' of moe.get_indices {{.*}}) = {1} (the cumsum has E * T elements)", num = 1 : i64, rhs = array<i64: 1, 0>
// CHECK-SAME: kind = "multiple", lhs = array<i64: 0, 0>, {{.*}} not a multiple of {1} (the cumsum has E * T elements)", num = 1 : i64, value = 8 : i64
func.func @multiples(%cs: tensor<?xi32>, %ids: tensor<?x2xi32>)
    -> (tensor<?xi32>, tensor<9xi32>) {
  %rev, %tok = moe.get_indices %cs, %ids
      : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  %off = moe.get_indptr %cs num_experts = 8 : tensor<?xi32> -> tensor<9xi32>
  return %rev, %off : tensor<?xi32>, tensor<9xi32>
}

// -----

// The chain's reshape: tensor.expand_shape of M rows into T x k, sized by
// tensor.dim of the weights: the scattered rows are k times the weights'.
// CHECK-LABEL: func.func @expand
// CHECK-SAME: kind = "eq", lhs = array<i64: 1, 0>, message = "@expand: dimension 0 of argument 1 is {0}, but dimension 0 of argument 0 ('weights' of moe.combine {{.*}}) is {1}: the first must be 2 times the second", num = 2 : i64, rhs = array<i64: 0, 0>
func.func @expand(%w: tensor<?x2xf32>, %s: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %w, %c0 : tensor<?x2xf32>
  %p = tensor.expand_shape %s [[0, 1], [2]] output_shape [%t, 2, 16]
      : tensor<?x16xf32> into tensor<?x2x16xf32>
  %y = moe.combine %p weights(%w : tensor<?x2xf32>)
      : tensor<?x2x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Nothing ties two argument sizes: the sign checks and the result's;
// private functions get none.
// CHECK-LABEL: func.func @gather
// CHECK-SAME: kind = "nonneg", lhs = array<i64: 0, 0>
// CHECK-SAME: kind = "nonneg", lhs = array<i64: 1, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 2, 0>, message = "@gather: dimension 0 of result 0 (the out-parameter, argument 2) is {0}, but dimension 0 of argument 1 ('indices' of moe.gather {{.*}}) is {1}: they must be equal (M)"
// CHECK-NOT: kind = "eq"
// CHECK-LABEL: func.func private @helper
// CHECK-NOT: moe.shape_checks
func.func @gather(%x: tensor<?x16xf32>, %i: tensor<?xi32>) -> tensor<?x16xf32> {
  %g = moe.gather %x[%i] : tensor<?x16xf32>, tensor<?xi32> -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}
func.func private @helper(%x: tensor<?x16xf32>, %l: tensor<?x4xf32>) -> tensor<?x16xf32> {
  return %x : tensor<?x16xf32>
}

// -----

// moe.ffn_grad: rows of dy, x, logits, dx and dlogits are T (the
// decomposition reshapes by x's T what routing on the logits produced);
// T * k bounded by int32.
// CHECK-LABEL: func.func @ffn_grad
// CHECK-SAME: kind = "eq", lhs = array<i64: 1, 0>, message = "@ffn_grad: dimension 0 of argument 1 ('x' of moe.ffn_grad at {{[^)]*}}) is {0}, but dimension 0 of argument 0 ('dy' of moe.ffn_grad at {{[^)]*}}) is {1}: they must be equal (T)", num = 1 : i64, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 2, 0>, message = "@ffn_grad: dimension 0 of argument 2 ('logits' of moe.ffn_grad at {{[^)]*}}) is {0}, but dimension 0 of argument 0 ('dy' of moe.ffn_grad at {{[^)]*}}) is {1}: they must be equal (T)", num = 1 : i64, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 5, 0>, message = "@ffn_grad: dimension 0 of result 0 (the out-parameter, argument 5) is {0}, but dimension 0 of argument 0 ('dy' of moe.ffn_grad at {{[^)]*}}) is {1}: they must be equal (T)", num = 1 : i64, output, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 6, 0>, message = "@ffn_grad: dimension 0 of result 1 (the out-parameter, argument 6) is {0}, but dimension 0 of argument 0 ('dy' of moe.ffn_grad at {{[^)]*}}) is {1}: they must be equal (T)", num = 1 : i64, output, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "max", lhs = array<i64: 0, 0>, message = "{{.*}} more than {1}: T * k would not fit the int32 indices", num = 1 : i64, value = 1073741823 : i64
func.func @ffn_grad(%dy: tensor<?x16xf32>, %x: tensor<?x16xf32>, %logits: tensor<?x4xf32>,
                    %w_up: tensor<4x16x32xf32>, %w_down: tensor<4x16x16xf32>)
    -> (tensor<?x16xf32>, tensor<?x4xf32>) {
  %r:4 = moe.ffn_grad %dy, %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat
      : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>,
        tensor<4x16x16xf32>
      -> tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>, tensor<4x16x16xf32>
  return %r#0, %r#1 : tensor<?x16xf32>, tensor<?x4xf32>
}

// -----

// moe.row_dot: lhs, rhs, acc and the result have M rows.
// CHECK-LABEL: func.func @row_dot
// CHECK-SAME: kind = "eq", lhs = array<i64: 1, 0>, message = "@row_dot: dimension 0 of argument 1 ('rhs' of moe.row_dot at {{[^)]*}}) is {0}, but dimension 0 of argument 0 ('lhs' of moe.row_dot at {{[^)]*}}) is {1}: they must be equal (M)"
// CHECK-SAME: kind = "eq", lhs = array<i64: 2, 0>, message = "@row_dot: dimension 0 of argument 2 ('acc' of moe.row_dot at {{[^)]*}}) is {0}, but dimension 0 of argument 0 ('lhs' of moe.row_dot at {{[^)]*}}) is {1}: they must be equal (M)"
// CHECK-SAME: kind = "eq", lhs = array<i64: 3, 0>, message = "@row_dot: dimension 0 of result 0 (the out-parameter, argument 3) is {0}, but dimension 0 of argument 0 ('lhs' of moe.row_dot at {{[^)]*}}) is {1}: they must be equal (M)", num = 1 : i64, output, rhs = array<i64: 0, 0>
func.func @row_dot(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %c: tensor<?xf32>) -> tensor<?xf32> {
  %r = moe.row_dot %a, %b accumulate(%c : tensor<?xf32>) : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// moe.grouped_matmul_wgrad: the operands' contracted rows agree (a gathered
// operand's are its indices').
// CHECK-LABEL: func.func @grouped_matmul_wgrad
// CHECK-SAME: kind = "eq", lhs = array<i64: 2, 0>, message = "@grouped_matmul_wgrad: dimension 0 of argument 2 ('rhs_gather' of moe.grouped_matmul_wgrad at {{[^)]*}}) is {0}, but dimension 0 of argument 0 ('lhs' of moe.grouped_matmul_wgrad at {{[^)]*}}) is {1}: they must be equal (M)"
func.func @grouped_matmul_wgrad(%a: tensor<?x8xbf16>, %b: tensor<?x16xbf16>, %i: tensor<?xi32>, %o: tensor<3xi32>) -> tensor<2x8x16xf32> {
  %r = moe.grouped_matmul_wgrad %a, %b[%i : tensor<?xi32>] offsets(%o : tensor<3xi32>) : tensor<?x8xbf16>, tensor<?x16xbf16> -> tensor<2x8x16xf32>
  return %r : tensor<2x8x16xf32>
}

// -----

// moe.ffn_train's h has T * k rows, its weights and ids T; moe.ffn_grad's
// saved operands the same (here they are the forward's results, so the
// classes merge: h, returned, must be twice dy's rows).
// CHECK-LABEL: func.func @ffn_train_then_grad
// CHECK-SAME: kind = "eq", lhs = array<i64: 1, 0>, message = "@ffn_train_then_grad: dimension 0 of argument 1 ('x' of moe.ffn_train at {{[^)]*}}) is {0}, but dimension 0 of argument 0 ('dy' of moe.ffn_grad at {{[^)]*}}) is {1}: they must be equal (T)", num = 1 : i64, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "eq", lhs = array<i64: 5, 0>, message = "@ffn_train_then_grad: dimension 0 of result 0 (the out-parameter, argument 5) is {0}, but dimension 0 of argument 0 ('dy' of moe.ffn_grad at {{[^)]*}}) is {1}: the first must be 2 times the second", num = 2 : i64, output, rhs = array<i64: 0, 0>
// CHECK-SAME: kind = "max", lhs = array<i64: 0, 0>, message = "{{.*}} more than {1}: T * k would not fit the int32 indices", num = 1 : i64, value = 1073741823 : i64
func.func @ffn_train_then_grad(%dy: tensor<?x16xf32>, %x: tensor<?x16xf32>, %logits: tensor<?x4xf32>,
                               %w_up: tensor<4x16x32xf32>, %w_down: tensor<4x16x16xf32>)
    -> (tensor<?x32xf32>, tensor<?x16xf32>) {
  %y, %h, %w, %i = moe.ffn_train %x, %logits, %w_up, %w_down k = 2 scoring = softmax
      activation = silu layout = concat
      : tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>, tensor<4x16x16xf32>
      -> tensor<?x16xf32>, tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>
  %r:4 = moe.ffn_grad %dy, %x, %logits, %w_up, %w_down saved(%h, %w, %i : tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>)
      k = 2 scoring = softmax activation = silu layout = concat
      : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>, tensor<4x16x16xf32>
      -> tensor<?x16xf32>, tensor<?x4xf32>, tensor<4x16x32xf32>, tensor<4x16x16xf32>
  return %h, %r#0 : tensor<?x32xf32>, tensor<?x16xf32>
}

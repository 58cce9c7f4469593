// RUN: moe-opt %s --moe-emit-shape-checks --split-input-file -verify-diagnostics

// expected-error @+1 {{invalid 'moe.shape_checks': expected an array of dictionaries}}
func.func @not_array(%x: memref<?xf32>) attributes {moe.shape_checks = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{invalid 'moe.shape_checks': unknown kind 'less'}}
func.func @kind(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "less", lhs = array<i64: 0, 0>, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{each record needs 'kind', 'message' and 'lhs'}}
func.func @fields(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 0>, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{an 'eq' record needs 'rhs' and positive 'num' / 'den'}}
func.func @eq(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "eq", lhs = array<i64: 0, 0>, rhs = array<i64: 0, 0>, num = 0 : i64, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{a 'multiple' record needs 'rhs' or a positive 'value'}}
func.func @multiple(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "multiple", lhs = array<i64: 0, 0>, value = 0 : i64, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{'num' must be an integer}}
func.func @num(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "eq", lhs = array<i64: 0, 0>, rhs = array<i64: 0, 0>, num = "2", message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{'moe.shape_checks' names argument 3 of a function with 1 arguments}}
func.func @range(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 3, 0>, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{'moe.shape_checks' names dimension 1 of argument 0 ('memref<?xf32>')}}
func.func @dim(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 0, 1>, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{'moe.shape_checks' names argument 0 of type 'tensor<?xf32>', not a ranked memref (run --moe-emit-shape-checks after bufferization)}}
func.func @tensor(%x: tensor<?xf32>) attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 0, 0>, message = "m"}]} {
  return
}

// -----

func.func private @moeRuntimeReportShapeError(i32)
// expected-error @+1 {{'moeRuntimeReportShapeError' (the shape-check report function) is already defined with another type; it must be (!llvm.ptr, i64, i64) -> ()}}
func.func @clash(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 0, 0>, message = "m"}]} {
  return
}

// -----

// expected-error @+1 {{cannot return an empty buffer of type 'memref<?xf32, strided<[?], offset: ?>>' from a failed shape check (identity layouts only)}}
func.func @layout(%x: memref<?xf32, strided<[?], offset: ?>>) -> memref<?xf32, strided<[?], offset: ?>>
    attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 0, 0>, message = "m"}]} {
  return %x : memref<?xf32, strided<[?], offset: ?>>
}

// -----

// The message becomes a printf format of the sizes in this order.
// expected-error @+1 {{invalid 'moe.shape_checks': a message may hold '{0}' and then '{1}', each once}}
func.func @order(%x: memref<?xf32>, %y: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "eq", lhs = array<i64: 0, 0>, rhs = array<i64: 1, 0>, message = "{1} vs {0}"}]} {
  return
}

// -----

// expected-error @+1 {{invalid 'moe.shape_checks': a message may hold '{0}' and then '{1}', each once}}
func.func @twice(%x: memref<?xf32>) attributes {moe.shape_checks = [
    {kind = "nonneg", lhs = array<i64: 0, 0>, message = "{0} and {0}"}]} {
  return
}

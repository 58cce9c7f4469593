// RUN: moe-opt %s --moe-order-constant-globals | FileCheck %s

// Bufferization's constant globals are renamed and ordered by their first
// memref.get_global in the module: @f's constant becomes @__constant_2xf32,
// @g's @__constant_2xf32_0, @h's (another base) @__constant_3xi32; the
// unused one comes last; the globals move together to where the first
// stood; a non-constant global and one that is not bufferization's keep
// their names and places.

// CHECK-LABEL: module {
// CHECK: memref.global "private" @state : memref<2xf32>
// CHECK-NEXT: memref.global "private" constant @__constant_2xf32 : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-NEXT: memref.global "private" constant @__constant_2xf32_0 : memref<2xf32> = dense<[3.000000e+00, 4.000000e+00]>
// CHECK-NEXT: memref.global "private" constant @__constant_3xi32 : memref<3xi32> = dense<[5, 6, 7]>
// CHECK-NEXT: memref.global "private" constant @__constant_2xf32_1 : memref<2xf32> = dense<0.000000e+00>
// CHECK-NEXT: memref.global "private" constant @weights : memref<2xf32>
// CHECK-LABEL: func.func @f(
// CHECK: memref.get_global @__constant_2xf32 :
// CHECK-LABEL: func.func @g(
// CHECK: memref.get_global @__constant_2xf32_0 :
// CHECK: memref.get_global @__constant_2xf32 :
// CHECK-LABEL: func.func @h(
// CHECK: memref.get_global @__constant_3xi32 :
module {
  memref.global "private" @state : memref<2xf32>
  memref.global "private" constant @__constant_2xf32_1 : memref<2xf32> = dense<0.0>
  memref.global "private" constant @__constant_2xf32 : memref<2xf32> = dense<[3.0, 4.0]>
  memref.global "private" constant @__constant_3xi32_0 : memref<3xi32> = dense<[5, 6, 7]>
  memref.global "private" constant @__constant_2xf32_0 : memref<2xf32> = dense<[1.0, 2.0]>
  memref.global "private" constant @weights : memref<2xf32> = dense<[8.0, 9.0]>
  func.func @f() -> memref<2xf32> {
    %a = memref.get_global @__constant_2xf32_0 : memref<2xf32>
    return %a : memref<2xf32>
  }
  func.func @g() -> (memref<2xf32>, memref<2xf32>) {
    %b = memref.get_global @__constant_2xf32 : memref<2xf32>
    %c = memref.get_global @__constant_2xf32_0 : memref<2xf32>
    return %b, %c : memref<2xf32>, memref<2xf32>
  }
  func.func @h() -> memref<3xi32> {
    %d = memref.get_global @__constant_3xi32_0 : memref<3xi32>
    return %d : memref<3xi32>
  }
}

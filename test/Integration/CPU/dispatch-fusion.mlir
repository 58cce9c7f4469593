// Dispatch metadata through the cumsum chain and through the fused
// moe.dispatch (counting sort) must be bitwise identical, including -1 ids,
// ids >= E, a duplicated id in a row, an empty expert and dynamic T.
// RUN: moe-opt %s --moe-lower-to-cpu | %mlir-cpu-runner | grep -v 'Unranked Memref' > %t.unfused
// RUN: moe-opt %s --moe-fuse --moe-lower-to-cpu | %mlir-cpu-runner | grep -v 'Unranked Memref' > %t.fused
// RUN: diff %t.unfused %t.fused
// RUN: FileCheck %s < %t.fused
// RUN: moe-opt %s --moe-fuse | FileCheck %s --check-prefix=IR
// IR: moe.dispatch
// IR-NOT: moe.cumsum

func.func private @printMemrefI32(memref<*xi32>)

func.func @print(%t: tensor<?xi32>) {
  %m = bufferization.to_buffer %t : tensor<?xi32> to memref<?xi32>
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

func.func @main() {
  // E = 5; expert 4 is empty; row 1 names expert 2 twice; -1 and 7 are not
  // dispatched.
  %c = arith.constant dense<[[2, 0], [2, 2], [-1, 3], [0, 7], [3, 1]]> : tensor<5x2xi32>
  %ids = tensor.cast %c : tensor<5x2xi32> to tensor<?x2xi32>
  %cs = moe.cumsum %ids num_experts = 5 : tensor<?x2xi32> -> tensor<?xi32>
  %rev, %tok = moe.get_indices %cs, %ids : tensor<?xi32>, tensor<?x2xi32> -> tensor<?xi32>, tensor<?xi32>
  %off = moe.get_indptr %cs num_experts = 5 : tensor<?xi32> -> tensor<6xi32>
  %offd = tensor.cast %off : tensor<6xi32> to tensor<?xi32>
  call @print(%offd) : (tensor<?xi32>) -> ()
  call @print(%rev) : (tensor<?xi32>) -> ()
  call @print(%tok) : (tensor<?xi32>) -> ()
  return
}
// Expert 0: (0,1) (3,0); expert 1: (4,1); expert 2: (0,0) (1,0) (1,1);
// expert 3: (2,1) (4,0); expert 4: none; undispatched: (2,0) (3,1).
// CHECK: [0,  2,  3,  6,  8,  8]
// CHECK: [1,  6,  9,  0,  2,  3,  5,  8,  4,  7]
// CHECK: [0,  3,  4,  0,  1,  1,  2,  4,  2,  3]

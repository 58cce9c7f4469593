// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-gpu-programmatic-launch | FileCheck %s

// The kernel that waits for its predecessor (griddepcontrol.wait) becomes
// @<name>__pdl, and so do its launches; a kernel that only allows its
// dependents early (launch_dependents), or does neither, keeps its name.

// CHECK-LABEL: gpu.module @kernels
// CHECK: gpu.func @waits__pdl() kernel
// CHECK: gpu.func @triggers() kernel
// CHECK: gpu.func @plain() kernel
// CHECK-LABEL: func.func @host(
// CHECK: gpu.launch_func  @kernels::@waits__pdl
// CHECK: gpu.launch_func  @kernels::@triggers
// CHECK: gpu.launch_func  @kernels::@plain
// CHECK: gpu.launch_func  @kernels::@waits__pdl
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @waits() kernel {
      nvvm.griddepcontrol wait
      nvvm.griddepcontrol launch_dependents
      gpu.return
    }
    gpu.func @triggers() kernel {
      nvvm.griddepcontrol launch_dependents
      gpu.return
    }
    gpu.func @plain() kernel {
      gpu.return
    }
  }
  func.func @host() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @kernels::@waits blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @kernels::@triggers blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @kernels::@plain blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @kernels::@waits blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// The new name must be free.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @+1 {{moe-gpu-programmatic-launch: kernel name 'k__pdl' is taken}}
    gpu.func @k() kernel {
      nvvm.griddepcontrol wait
      gpu.return
    }
    gpu.func @k__pdl() {
      gpu.return
    }
  }
}

#===- AddMoe.cmake - helpers for moe-mlir libraries -------*- cmake -*-===//
#
# Our own library lists (not MLIR_DIALECT_LIBS, which the installed
# MLIRConfig.cmake pre-fills with every upstream dialect).
#
#===------------------------------------------------------------------===//

# Every moe-mlir library links the shared libMLIR.so (Debian builds LLVM with
# LLVM_LINK_LLVM_DYLIB=ON); mixing in the static libMLIR*.a would register
# passes and options twice.
function(add_moe_dialect_library name)
  set_property(GLOBAL APPEND PROPERTY MOE_DIALECT_LIBS ${name})
  add_mlir_library(${name} ${ARGN} LINK_LIBS PUBLIC MLIR)
endfunction()

function(add_moe_conversion_library name)
  set_property(GLOBAL APPEND PROPERTY MOE_CONVERSION_LIBS ${name})
  add_mlir_library(${name} ${ARGN} LINK_LIBS PUBLIC MLIR)
endfunction()

function(add_moe_library name)
  set_property(GLOBAL APPEND PROPERTY MOE_LIBS ${name})
  add_mlir_library(${name} ${ARGN} LINK_LIBS PUBLIC MLIR)
endfunction()

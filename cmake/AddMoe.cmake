#===- AddMoe.cmake - helpers for moe-mlir libraries -------*- cmake -*-===//
#
# Our own library lists (not MLIR_DIALECT_LIBS, which the installed
# MLIRConfig.cmake pre-fills with every upstream dialect).
#
#===------------------------------------------------------------------===//

# Installs a moe-mlir library (or tool) into the MoeMLIRTargets export set,
# which cmake/MoeMLIRPackage.cmake turns into the MoeMLIR:: targets of the
# installed CMake package (CIRCT's add_circt_library_install does the same
# for CIRCTTargets). add_mlir_library's own install would put our targets in
# MLIR's export set, hence DISABLE_INSTALL below.
function(add_moe_library_install name)
  # llvm_setup_rpath gives installed LLVM-style binaries only
  # $ORIGIN/../lib, but Debian's libMLIR.so lives in LLVM's library
  # directory, off the loader's default path: without it an installed
  # moe-opt or libMLIRMoeCAPI.so does not load.
  get_target_property(install_rpath ${name} INSTALL_RPATH)
  if(install_rpath)
    set_property(TARGET ${name} APPEND PROPERTY INSTALL_RPATH
      "${LLVM_LIBRARY_DIR}")
  endif()
  install(TARGETS ${name}
    EXPORT MoeMLIRTargets
    ARCHIVE DESTINATION lib
    LIBRARY DESTINATION lib
    RUNTIME DESTINATION bin)
  set_property(GLOBAL APPEND PROPERTY MOE_EXPORTS ${name})
endfunction()

# Usage requirements of a C++ library for out-of-tree consumers: our headers
# (source and generated) and C++17. MLIR's and LLVM's include directory is
# added by MoeMLIRConfig.cmake.
function(_moe_library_setup name)
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${MOE_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${MOE_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  target_compile_features(${name} PUBLIC cxx_std_17)
  add_moe_library_install(${name})
endfunction()

# Every moe-mlir library links the shared libMLIR.so (Debian builds LLVM with
# LLVM_LINK_LLVM_DYLIB=ON); mixing in the static libMLIR*.a would register
# passes and options twice.
function(add_moe_dialect_library name)
  set_property(GLOBAL APPEND PROPERTY MOE_DIALECT_LIBS ${name})
  add_mlir_library(${name} DISABLE_INSTALL ${ARGN} LINK_LIBS PUBLIC MLIR)
  _moe_library_setup(${name})
endfunction()

function(add_moe_conversion_library name)
  set_property(GLOBAL APPEND PROPERTY MOE_CONVERSION_LIBS ${name})
  add_mlir_library(${name} DISABLE_INSTALL ${ARGN} LINK_LIBS PUBLIC MLIR)
  _moe_library_setup(${name})
endfunction()

function(add_moe_library name)
  set_property(GLOBAL APPEND PROPERTY MOE_LIBS ${name})
  add_mlir_library(${name} DISABLE_INSTALL ${ARGN} LINK_LIBS PUBLIC MLIR)
  _moe_library_setup(${name})
endfunction()

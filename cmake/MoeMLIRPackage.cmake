#===- MoeMLIRPackage.cmake - the MoeMLIR CMake package ----*- cmake -*-===//
#
# Included at the end of the top-level CMakeLists.txt, once every library
# has joined the MoeMLIRTargets export set (cmake/AddMoe.cmake). Produces
#   <prefix>/lib/cmake/MoeMLIR/MoeMLIRConfig.cmake         find_package entry
#   <prefix>/lib/cmake/MoeMLIR/MoeMLIRConfigVersion.cmake
#   <prefix>/lib/cmake/MoeMLIR/MoeMLIRTargets*.cmake       MoeMLIR:: targets
# for the install prefix and, as CIRCT and MLIR do, for the build tree
# (<build>/lib/cmake/MoeMLIR), so consumers can use either.
#
#===------------------------------------------------------------------===//

include(CMakePackageConfigHelpers)

# moe-mlir has no releases yet; the version only lets consumers ask for a
# compatible package (same minor version).
set(MOE_MLIR_VERSION 0.1.0)
set(MOE_MLIR_PACKAGE_DIR lib/cmake/MoeMLIR)

get_property(MOE_MLIR_EXPORTED_TARGETS GLOBAL PROPERTY MOE_EXPORTS)
get_property(MOE_MLIR_CONFIG_DIALECT_LIBS GLOBAL PROPERTY MOE_DIALECT_LIBS)
get_property(MOE_MLIR_CONFIG_CONVERSION_LIBS GLOBAL PROPERTY MOE_CONVERSION_LIBS)
get_property(MOE_MLIR_CONFIG_LIBS GLOBAL PROPERTY MOE_LIBS)
set(MOE_MLIR_CONFIG_ENABLE_CUDA_RUNTIME ${MOE_ENABLE_CUDA_RUNTIME})
set(MOE_MLIR_CONFIG_MLIR_DIR "${MLIR_DIR}")
set(MOE_MLIR_CONFIG_LLVM_VERSION_MAJOR "${LLVM_VERSION_MAJOR}")

# Build tree.
set(MOE_MLIR_CONFIG_INCLUDE_DIRS
  "${MOE_SOURCE_DIR}/include" "${MOE_BINARY_DIR}/include")
export(EXPORT MoeMLIRTargets
  FILE ${MOE_BINARY_DIR}/${MOE_MLIR_PACKAGE_DIR}/MoeMLIRTargets.cmake
  NAMESPACE MoeMLIR::)
configure_file(${MOE_SOURCE_DIR}/cmake/MoeMLIRConfig.cmake.in
  ${MOE_BINARY_DIR}/${MOE_MLIR_PACKAGE_DIR}/MoeMLIRConfig.cmake @ONLY)
write_basic_package_version_file(
  ${MOE_BINARY_DIR}/${MOE_MLIR_PACKAGE_DIR}/MoeMLIRConfigVersion.cmake
  VERSION ${MOE_MLIR_VERSION}
  COMPATIBILITY SameMinorVersion)

# Install prefix: paths relative to the config file's own location.
set(MOE_MLIR_CONFIG_INCLUDE_DIRS "\${MOE_MLIR_PREFIX}/include")
configure_file(${MOE_SOURCE_DIR}/cmake/MoeMLIRConfig.cmake.in
  ${MOE_BINARY_DIR}/CMakeFiles/MoeMLIRConfig.cmake @ONLY)
install(FILES
  ${MOE_BINARY_DIR}/CMakeFiles/MoeMLIRConfig.cmake
  ${MOE_BINARY_DIR}/${MOE_MLIR_PACKAGE_DIR}/MoeMLIRConfigVersion.cmake
  DESTINATION ${MOE_MLIR_PACKAGE_DIR}
  COMPONENT moe-mlir-cmake-exports)
install(EXPORT MoeMLIRTargets
  DESTINATION ${MOE_MLIR_PACKAGE_DIR}
  NAMESPACE MoeMLIR::
  COMPONENT moe-mlir-cmake-exports)

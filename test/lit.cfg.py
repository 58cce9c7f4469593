# -*- Python -*-
# lit configuration of the moe-mlir regression tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MOE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%mlir_lib_dir", config.mlir_lib_dir))
config.substitutions.append(("%moe_src_root", config.moe_src_root))

config.substitutions.append(("%moe_obj_root", config.moe_obj_root))
config.substitutions.append(("%python", config.python_executable))

# Execution tests: `moe-opt --moe-lower-to-cpu | %mlir-cpu-runner`.
runner_libs = ",".join(
    os.path.join(config.mlir_lib_dir, "lib%s%s" % (name, config.llvm_shlib_ext))
    for name in ("mlir_runner_utils", "mlir_c_runner_utils")
)
config.substitutions.append(
    (
        "%mlir-cpu-runner",
        os.path.join(config.llvm_tools_dir, "mlir-runner")
        + " -e main -entry-point-result=void -shared-libs="
        + runner_libs,
    )
)

# GPU tests (test/GPU): the CUDA runtime and moe-aot were built. They compile
# (ptxas from the toolkit) and inspect the result; none needs a GPU.
if config.moe_enable_cuda_runtime:
    config.available_features.add("cuda-runtime")
config.substitutions.append(("%cuda_toolkit_root", config.cuda_toolkit_root))
config.substitutions.append(("%llvm_tools_dir", config.llvm_tools_dir))
config.substitutions.append(("%moe-aot", os.path.join(config.moe_tools_dir, "moe-aot")))

# Embedding tests (test/Embedding): `%cmake_exe --install`, then
# `%cmake_exe %consumer_cmake_flags -S <example> -B <dir>` builds an
# out-of-tree consumer with this build's generator, compilers and launcher.
consumer_flags = [
    "-G",
    '"%s"' % config.cmake_generator,
    "-DCMAKE_BUILD_TYPE=Release",
    "-DCMAKE_C_COMPILER=" + config.cmake_c_compiler,
    "-DCMAKE_CXX_COMPILER=" + config.cmake_cxx_compiler,
    "-DMLIR_DIR=" + config.mlir_cmake_dir,
]
if config.cmake_make_program:
    consumer_flags.append("-DCMAKE_MAKE_PROGRAM=" + config.cmake_make_program)
if config.cmake_c_compiler_launcher:
    consumer_flags.append("-DCMAKE_C_COMPILER_LAUNCHER=" + config.cmake_c_compiler_launcher)
if config.cmake_cxx_compiler_launcher:
    consumer_flags.append("-DCMAKE_CXX_COMPILER_LAUNCHER=" + config.cmake_cxx_compiler_launcher)
config.substitutions.append(("%cmake_exe", config.cmake_command))
config.substitutions.append(("%consumer_cmake_flags", " ".join(consumer_flags)))
llvm_config.with_system_environment(["CCACHE_DIR", "CCACHE_CONFIGPATH"])

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.moe_tools_dir, config.llvm_tools_dir]
tools = [ToolSubst("moe-opt", unresolved="fatal")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

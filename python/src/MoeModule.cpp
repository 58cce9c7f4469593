//===- MoeModule.cpp - the moe_mlir._moe extension module -----------------===//
//
// Part of the moe-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Low-level bindings (underscore names). The documented, typed API is the
// pure-Python layer in moe_mlir/ (ir.py, cpu.py, presets.py, gpu.py), which
// wraps these classes.
//
//===----------------------------------------------------------------------===//

#include "MoeMlirPython.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
using namespace moe_py;

namespace {

PyObject *mlirErrorType = nullptr;
PyObject *buildErrorType = nullptr;

/// Raises `type(message)` with `.summary` and `.diagnostics` set.
void raise(PyObject *type, const MlirError &error) {
  nb::object exc =
      nb::steal(PyObject_CallFunction(type, "s", error.message().c_str()));
  if (!exc.is_valid())
    return; // the constructor raised; keep its error
  nb::list diagnostics;
  for (const std::string &d : error.diagnostics)
    diagnostics.append(nb::str(d.c_str()));
  nb::setattr(exc, "summary", nb::str(error.summary.c_str()));
  nb::setattr(exc, "diagnostics", diagnostics);
  PyErr_SetObject(type, exc.ptr());
}

nb::object typeInfoTuple(const TypeInfo &t) {
  nb::list shape;
  for (int64_t d : t.shape) {
    if (d < 0)
      shape.append(nb::none());
    else
      shape.append(d);
  }
  return nb::make_tuple(nb::tuple(shape), t.dtype, t.kind);
}

nb::list typeInfoList(const std::vector<TypeInfo> &types) {
  nb::list out;
  for (const TypeInfo &t : types)
    out.append(typeInfoTuple(t));
  return out;
}

} // namespace

NB_MODULE(_moe, m) {
  m.doc() = "Low-level bindings of moe-mlir (use the moe_mlir package).";
  // Where libMLIR.so and LLVM's runner utility libraries live.
  m.attr("LLVM_LIBRARY_DIR") = MOE_LLVM_LIBRARY_DIR;
  m.attr("SHLIB_SUFFIX") = MOE_SHLIB_SUFFIX;

  mlirErrorType = PyErr_NewExceptionWithDoc(
      "moe_mlir.MLIRError",
      "An MLIR failure (parse, verify, pass pipeline, build, JIT). The "
      "message holds the MLIR diagnostics with their locations; "
      "`diagnostics` lists them one by one and `summary` says what failed.",
      PyExc_Exception, nullptr);
  m.attr("MLIRError") = nb::handle(mlirErrorType);
  nb::object bases =
      nb::make_tuple(nb::handle(mlirErrorType), nb::handle(PyExc_ValueError));
  buildErrorType = PyErr_NewExceptionWithDoc(
      "moe_mlir.BuildError",
      "An invalid builder call (attribute value, operand types): both an "
      "MLIRError and a ValueError.",
      bases.ptr(), nullptr);
  m.attr("BuildError") = nb::handle(buildErrorType);

  nb::register_exception_translator([](const std::exception_ptr &p, void *) {
    try {
      std::rethrow_exception(p);
    } catch (const MlirBuildError &e) {
      raise(buildErrorType, e);
    } catch (const MlirError &e) {
      raise(mlirErrorType, e);
    }
  });

  nb::class_<PyMlirContext>(m, "_Context")
      .def(nb::init<>())
      .def_static("default", &PyMlirContext::getDefault)
      .def("__eq__", [](const PyMlirContext &a,
                        const PyMlirContext &b) { return a.state == b.state; })
      .def("__hash__", [](const PyMlirContext &c) {
        return std::hash<void *>()(c.state.get());
      });

  nb::class_<PyModule>(m, "_Module")
      .def(nb::init<PyMlirContext>(), nb::arg("context"))
      .def_static("parse", &PyModule::parse, nb::arg("text"),
                  nb::arg("context"), nb::arg("name"))
      .def("get_asm", &PyModule::print, nb::arg("generic"),
           nb::arg("debug_info"))
      .def("verify", &PyModule::verify)
      .def("run_pipeline", &PyModule::runPipeline, nb::arg("pipeline"),
           nb::arg("verify_each") = true,
           nb::call_guard<nb::gil_scoped_release>())
      .def("clone", &PyModule::clone)
      .def_prop_ro("context", &PyModule::context)
      .def("functions",
           [](const PyModule &self) {
             nb::list out;
             for (auto &[name, vis, ins, outs] : self.functions())
               out.append(nb::make_tuple(name, vis, typeInfoList(ins),
                                         typeInfoList(outs)));
             return out;
           })
      .def("translate_to_llvm_ir", &PyModule::translateToLLVMIR)
      .def("emit_object", &PyModule::emitObject, nb::arg("path"),
           nb::arg("triple"), nb::arg("pic"), nb::arg("opt_level"),
           nb::arg("cpu"), nb::arg("features"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("compile_cpu", &PyModule::compileCpu, nb::arg("opt_level"),
           nb::arg("pipeline"), nb::arg("shared_libs"),
           nb::call_guard<nb::gil_scoped_release>());

  nb::class_<PyValue>(m, "_Value").def_prop_ro("type", [](const PyValue &v) {
    return typeInfoTuple(v.type());
  });

  nb::class_<PyFunctionBuilder>(m, "_FunctionBuilder")
      .def(
          nb::init<
              const PyModule &, const std::string &,
              const std::vector<std::pair<std::vector<int64_t>, std::string>> &,
              const std::string &, const PyLoc &>(),
          nb::arg("module"), nb::arg("name"), nb::arg("inputs"),
          nb::arg("visibility"), nb::arg("loc"))
      .def_prop_ro("arguments", &PyFunctionBuilder::arguments)
      .def_prop_ro("is_open", &PyFunctionBuilder::isOpen)
      .def_prop_ro("name", &PyFunctionBuilder::name)
      .def("ret", &PyFunctionBuilder::ret)
      .def("abandon", &PyFunctionBuilder::abandon)
      .def("topk", &PyFunctionBuilder::topk)
      .def("route", &PyFunctionBuilder::route)
      .def("cumsum", &PyFunctionBuilder::cumsum)
      .def("get_indices", &PyFunctionBuilder::getIndices)
      .def("get_indptr", &PyFunctionBuilder::getIndptr)
      .def("gather", &PyFunctionBuilder::gather)
      .def("grouped_matmul", &PyFunctionBuilder::groupedMatmul)
      .def("glu", &PyFunctionBuilder::glu)
      .def("scatter", &PyFunctionBuilder::scatter)
      .def("combine", &PyFunctionBuilder::combine)
      .def("indices_to_multihot", &PyFunctionBuilder::indicesToMultihot)
      .def("multihot_to_indices", &PyFunctionBuilder::multihotToIndices)
      .def("ffn_family", &PyFunctionBuilder::ffnFamily)
      .def("expand_slots", &PyFunctionBuilder::expandSlots);

  bindExecution(m);
  bindSignatures(m);
}

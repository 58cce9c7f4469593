/*===- moe-capi-smoke.c - smoke test of the moe-mlir C API ----------------===*\
|*                                                                            *|
|* Part of the moe-mlir project.                                              *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* A C99 program that embeds moe-mlir the way a foreign compiler or runtime  *|
|* would, using only the C API (libMLIRMoeCAPI.so):                           *|
|*  1. context + registry with mlirMoeRegisterAllDialects, moe loaded through *|
|*     its dialect handle;                                                    *|
|*  2. parse + verify a module with a moe.ffn, run                            *|
|*     builtin.module(moe-decompose,moe-fuse) via mlirParsePassPipeline (and  *|
|*     via mlirOpPassManagerAddPipeline + mlirMoeBuildFusePipeline) and check *|
|*     the printed result holds the fused ops;                                *|
|*  3. invalid moe IR fails to parse and the diagnostic handler sees why;     *|
|*  4. the typed pipeline helpers: bad --moe-lower-to-nvvm options are        *|
|*     rejected; --moe-lower-to-cpu output runs in the execution engine.      *|
|* Prints one line per check; exits non-zero on any failure.                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "moe-mlir-c/Dialects.h"
#include "moe-mlir-c/Pipelines.h"
#include "moe-mlir-c/Registration.h"

#include "mlir-c/Diagnostics.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok)
    ++failures;
}

/* A growing string that MlirStringCallbacks append to. */
typedef struct {
  char *data;
  size_t size;
} Buffer;

static void appendToBuffer(MlirStringRef text, void *userData) {
  Buffer *buffer = (Buffer *)userData;
  char *grown = (char *)realloc(buffer->data, buffer->size + text.length + 1);
  if (!grown)
    abort();
  memcpy(grown + buffer->size, text.data, text.length);
  buffer->size += text.length;
  grown[buffer->size] = '\0';
  buffer->data = grown;
}

static void clearBuffer(Buffer *buffer) {
  free(buffer->data);
  buffer->data = NULL;
  buffer->size = 0;
}

static int contains(const Buffer *buffer, const char *needle) {
  return buffer->data && strstr(buffer->data, needle) != NULL;
}

static MlirLogicalResult collectDiagnostic(MlirDiagnostic diagnostic,
                                           void *userData) {
  mlirDiagnosticPrint(diagnostic, appendToBuffer, userData);
  appendToBuffer(mlirStringRefCreateFromCString("\n"), userData);
  return mlirLogicalResultSuccess(); /* handled: not printed to stderr */
}

static MlirStringRef str(const char *s) {
  return mlirStringRefCreateFromCString(s);
}

/* A Mixtral-style layer, as a frontend would emit it. */
static const char *kLayer =
    "func.func @layer(%x: tensor<?x32xf32>, %l: tensor<?x8xf32>,\n"
    "                 %wu: tensor<8x32x128xf32>, %wd: tensor<8x64x32xf32>)\n"
    "    -> tensor<?x32xf32> {\n"
    "  %y = moe.ffn %x, %l, %wu, %wd k = 2 scoring = softmax\n"
    "      activation = silu layout = concat {normalize = true}\n"
    "      : tensor<?x32xf32>, tensor<?x8xf32>, tensor<8x32x128xf32>,\n"
    "        tensor<8x64x32xf32> -> tensor<?x32xf32>\n"
    "  return %y : tensor<?x32xf32>\n"
    "}\n";

/* Breaks moe.topk's verifier: k = 9 of E = 8 experts. */
static const char *kInvalid =
    "func.func @bad(%x: tensor<4x8xf32>) {\n"
    "  %v, %i = moe.topk %x k = 9 : tensor<4x8xf32> -> tensor<4x9xf32>,\n"
    "      tensor<4x9xi32>\n"
    "  return\n"
    "}\n";

/* Top-2 expert ids of one row of logits; returns id0 * 10 + id1. The C
   interface attribute gives it the _mlir_ciface_top2 entry point that
   mlirExecutionEngineInvokePacked calls. */
static const char *kTopk =
    "func.func @top2() -> i32 attributes {llvm.emit_c_interface} {\n"
    "  %x = arith.constant dense<[[0.1, 0.9, -1.0, 0.5, 2.0, 0.0, 0.3, "
    "0.2]]> : tensor<1x8xf32>\n"
    "  %v, %i = moe.topk %x k = 2 : tensor<1x8xf32> -> tensor<1x2xf32>,\n"
    "      tensor<1x2xi32>\n"
    "  %c0 = arith.constant 0 : index\n"
    "  %c1 = arith.constant 1 : index\n"
    "  %a = tensor.extract %i[%c0, %c0] : tensor<1x2xi32>\n"
    "  %b = tensor.extract %i[%c0, %c1] : tensor<1x2xi32>\n"
    "  %ten = arith.constant 10 : i32\n"
    "  %a10 = arith.muli %a, %ten : i32\n"
    "  %r = arith.addi %a10, %b : i32\n"
    "  return %r : i32\n"
    "}\n";

int main(void) {
  MlirContext ctx = mlirContextCreateWithThreading(false);
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirMoeRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirMoeRegisterAllPasses();
  mlirMoeRegisterAllPasses(); /* idempotent */

  Buffer diagnostics = {NULL, 0};
  MlirDiagnosticHandlerID handler = mlirContextAttachDiagnosticHandler(
      ctx, collectDiagnostic, &diagnostics, NULL);

  /* 1. The dialect handle. */
  MlirDialect moe =
      mlirDialectHandleLoadDialect(mlirGetDialectHandle__moe__(), ctx);
  check(!mlirDialectIsNull(moe), "moe dialect loaded via its handle");
  check(mlirStringRefEqual(mlirDialectGetNamespace(moe), str("moe")),
        "dialect namespace is 'moe'");

  /* 2. Parse, verify, decompose + fuse. */
  MlirModule module = mlirModuleCreateParse(ctx, str(kLayer));
  check(!mlirModuleIsNull(module), "moe.ffn module parses");
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "%s", diagnostics.data ? diagnostics.data : "");
    return 1;
  }
  MlirOperation moduleOp = mlirModuleGetOperation(module);
  check(mlirOperationVerify(moduleOp), "module verifies");

  MlirPassManager pm = mlirPassManagerCreate(ctx);
  Buffer errors = {NULL, 0};
  MlirLogicalResult parsed = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm),
      str("builtin.module(moe-decompose,moe-fuse)"), appendToBuffer, &errors);
  check(mlirLogicalResultIsSuccess(parsed),
        "mlirParsePassPipeline finds moe-decompose and moe-fuse");
  check(mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, moduleOp)),
        "decompose + fuse pipeline runs");
  check(mlirOperationVerify(moduleOp), "fused module verifies");
  Buffer printed = {NULL, 0};
  mlirOperationPrint(moduleOp, appendToBuffer, &printed);
  check(contains(&printed, "moe.route_dispatch"), "fused: moe.route_dispatch");
  check(contains(&printed, "moe.expert_gemm"), "fused: moe.expert_gemm");
  check(contains(&printed, "moe.combine"), "fused: moe.combine");
  check(!contains(&printed, "moe.ffn") && !contains(&printed, "moe.gather") &&
            !contains(&printed, "moe.scatter"),
        "fused: no moe.ffn / moe.gather / moe.scatter left");
  clearBuffer(&printed);
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);

  /* The same through mlirOpPassManagerAddPipeline + the typed helper. */
  module = mlirModuleCreateParse(ctx, str(kLayer));
  moduleOp = mlirModuleGetOperation(module);
  pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  check(mlirLogicalResultIsSuccess(mlirOpPassManagerAddPipeline(
            opm, str("moe-decompose"), appendToBuffer, &errors)),
        "mlirOpPassManagerAddPipeline finds moe-decompose");
  mlirMoeBuildFusePipeline(opm);
  check(mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, moduleOp)),
        "moe-decompose + mlirMoeBuildFusePipeline runs");
  mlirOperationPrint(moduleOp, appendToBuffer, &printed);
  check(contains(&printed, "moe.route_dispatch") &&
            !contains(&printed, "moe.ffn"),
        "typed fuse pipeline fuses");
  clearBuffer(&printed);
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);

  /* Unknown pass names are rejected with a message. */
  pm = mlirPassManagerCreate(ctx);
  clearBuffer(&errors);
  parsed = mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                 str("builtin.module(moe-no-such-pass)"),
                                 appendToBuffer, &errors);
  check(mlirLogicalResultIsFailure(parsed) &&
            contains(&errors, "moe-no-such-pass"),
        "unknown pass rejected with a message");
  mlirPassManagerDestroy(pm);

  /* 3. Invalid moe IR: parse fails, the handler got the verifier's error. */
  clearBuffer(&diagnostics);
  module = mlirModuleCreateParse(ctx, str(kInvalid));
  check(mlirModuleIsNull(module), "invalid moe IR does not parse");
  check(contains(&diagnostics, "expected k in [1, E = 8], got 9"),
        "diagnostic handler received the verifier message");
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);

  /* 4a. Typed helper: an unknown --moe-lower-to-nvvm option. */
  pm = mlirPassManagerCreate(ctx);
  clearBuffer(&errors);
  check(mlirLogicalResultIsFailure(mlirMoeBuildLowerToNvvmPipeline(
            mlirPassManagerGetAsOpPassManager(pm), str("tile-mm=64"),
            appendToBuffer, &errors)) &&
            errors.size > 0,
        "unknown moe-lower-to-nvvm option rejected with a message");
  check(mlirLogicalResultIsSuccess(mlirMoeBuildLowerToNvvmPipeline(
            mlirPassManagerGetAsOpPassManager(pm), str("chip=sm_90a"), NULL,
            NULL)),
        "moe-lower-to-nvvm pipeline builds");
  mlirPassManagerDestroy(pm);

  /* 4b. Typed helper: --moe-lower-to-cpu, then run it in the JIT. */
  clearBuffer(&diagnostics);
  module = mlirModuleCreateParse(ctx, str(kTopk));
  check(!mlirModuleIsNull(module), "moe.topk module parses");
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "%s", diagnostics.data ? diagnostics.data : "");
    return 1;
  }
  pm = mlirPassManagerCreate(ctx);
  mlirMoeBuildLowerToCpuPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                 /*deallocate=*/true);
  int lowered = mlirLogicalResultIsSuccess(
      mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)));
  check(lowered, "moe-lower-to-cpu pipeline runs");
  mlirPassManagerDestroy(pm);
  if (lowered) {
    MlirExecutionEngine jit = mlirExecutionEngineCreate(
        module, /*optLevel=*/2, /*numPaths=*/0, /*sharedLibPaths=*/NULL,
        /*enableObjectDump=*/false, /*enablePIC=*/false);
    check(!mlirExecutionEngineIsNull(jit), "execution engine created");
    if (!mlirExecutionEngineIsNull(jit)) {
      mlirExecutionEngineInitialize(jit);
      int32_t result = -1;
      void *args[] = {&result};
      MlirLogicalResult ran =
          mlirExecutionEngineInvokePacked(jit, str("top2"), args);
      printf("top2() = %d (invoke %s)\n", (int)result,
             mlirLogicalResultIsSuccess(ran) ? "succeeded" : "failed");
      check(mlirLogicalResultIsSuccess(ran) && result == 41,
            "JIT-compiled moe.topk picks experts 4 then 1");
      mlirExecutionEngineDestroy(jit);
    }
  }
  mlirModuleDestroy(module);

  mlirContextDetachDiagnosticHandler(ctx, handler);
  clearBuffer(&diagnostics);
  clearBuffer(&errors);
  mlirContextDestroy(ctx);

  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}

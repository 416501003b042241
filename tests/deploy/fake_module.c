/* A Kiln module written by hand against deploy/c_abi.h, for testing the runtime's loader without
 * the compiler: one function, scale2(x: float32[8], y: float32[8]) computing y = 2 * x, whose
 * loop runs through the installed runtime's parallel_for. It checks its arguments with the
 * messages of a compiled entry point (lower::make_packed_api), and fails with kKilnErrorAssert
 * when x[0] is negative, as a kernel's own assertion would. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "deploy/c_abi.h"

#ifndef KILN_FAKE_ABI_VERSION
#define KILN_FAKE_ABI_VERSION KILN_ABI_VERSION
#endif

static const KilnRuntimeApi *runtime = NULL;
static const char *last_error = "";
static char message[256];

static const char *get_last_error(void) { return last_error; }

typedef struct Closure {
  const float *x;
  float *y;
} Closure;

static int32_t body(int64_t begin, int64_t end, void *closure) {
  Closure *c = (Closure *)closure;
  for (int64_t i = begin; i < end; ++i) c->y[i] = 2.0f * c->x[i];
  return 0;
}

static const char *const names[] = {"x", "y"};

/* Sets last_error to "scale2: argument <i + 1> (<name>): <what>" and returns kKilnErrorArgument. */
static int32_t reject(int32_t i, const char *what) {
  snprintf(message, sizeof message, "scale2: argument %d (%s): %s", (int)i + 1, names[i], what);
  last_error = message;
  return kKilnErrorArgument;
}

/* The checks of a compiled entry for a float32[8] parameter, in its order. */
static int32_t check_float8(const KilnArg *args, int32_t i) {
  const KilnArg *a = &args[i];
  if (a->data == NULL) return reject(i, "the data pointer is null");
  if ((uintptr_t)a->data % 64 != 0) return reject(i, "the data pointer is not 64-byte aligned");
  if (a->ndim != 1) return reject(i, "expected 1 dimensions");
  if (a->dtype_code != kKilnFloat || a->dtype_bits != 32 || a->dtype_lanes != 1) {
    return reject(i, "expected dtype float32");
  }
  if (a->shape == NULL) return reject(i, "the shape pointer is null");
  if (a->shape[0] < 0) return reject(i, "dimension 0 is negative");
  if (a->shape[0] != 8) return reject(i, "dimension 0 must be 8");
  if (a->strides != NULL && a->strides[0] != 1) return reject(i, "the tensor must be compact (row-major)");
  return kKilnOk;
}

static int32_t scale2(const KilnArg *args, int32_t num_args) {
  if (num_args != 2) {
    last_error = "scale2: expected 2 arguments (x, y)";
    return kKilnErrorArgument;
  }
  if (args == NULL) {
    last_error = "scale2: the argument list is null";
    return kKilnErrorArgument;
  }
  for (int32_t i = 0; i < 2; ++i) {
    int32_t status = check_float8(args, i);
    if (status != kKilnOk) return status;
  }
  Closure c = {(const float *)args[0].data, (float *)args[1].data};
  if (c.x[0] < 0.0f) {
    last_error = "scale2: x[0] must not be negative";
    return kKilnErrorAssert;
  }
  if (runtime != NULL) return runtime->parallel_for(body, 8, &c);
  return body(0, 8, &c);
}

/* The exported entry point, under the prefixed name; the table refers to scale2 itself. */
int32_t kiln_fn_scale2(const KilnArg *args, int32_t num_args) { return scale2(args, num_args); }

/* Lets the test see whether the loader installed a runtime. */
const KilnRuntimeApi *fake_module_runtime(void) { return runtime; }

static const int64_t shape8[] = {8};
static const KilnParamInfo params[] = {{"x", 1, kKilnFloat, 32, 1, shape8}, {"y", 1, kKilnFloat, 32, 1, shape8}};
static const KilnFunctionInfo scale2_info = {"scale2", "scale2(x: float32[8], y: float32[8])", scale2, 2, params};
static const KilnFunctionInfo *const functions[] = {&scale2_info};
const KilnModuleInfo kiln_module_info = {KILN_FAKE_ABI_VERSION, 1, functions, get_last_error, &runtime, "llvm"};

/* A Kiln module written by hand against deploy/c_abi.h, for testing the runtime's loader without
 * the compiler: one function, scale2(x: float32[8], y: float32[8]) computing y = 2 * x, whose
 * loop runs through the installed runtime's parallel_for. */
#include <stddef.h>

#include "deploy/c_abi.h"

#ifndef KILN_FAKE_ABI_VERSION
#define KILN_FAKE_ABI_VERSION KILN_ABI_VERSION
#endif

static const KilnRuntimeApi *runtime = NULL;
static const char *last_error = "";

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

static int is_float8(const KilnArg *a) {
  return a->data != NULL && a->ndim == 1 && a->shape != NULL && a->shape[0] == 8 && a->dtype_code == kKilnFloat &&
         a->dtype_bits == 32 && a->dtype_lanes == 1;
}

static int32_t scale2(const KilnArg *args, int32_t num_args) {
  if (args == NULL || num_args != 2) {
    last_error = "scale2: expected 2 arguments";
    return kKilnErrorArgument;
  }
  if (!is_float8(&args[0]) || !is_float8(&args[1])) {
    last_error = "scale2: arguments must be float32[8]";
    return kKilnErrorArgument;
  }
  Closure c = {(const float *)args[0].data, (float *)args[1].data};
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

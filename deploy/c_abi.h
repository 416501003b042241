/* The C ABI between compiled Kiln kernels and the code that calls them.
 *
 * A compiled module (a shared library, or code held by the compiler's JIT) exports, for each
 * function `name`, only its packed entry point, under a prefixed symbol:
 *
 *   int32_t kiln_fn_<name>(const KilnArg *args, int32_t num_args);
 *
 * where <name> is the function's name with every character other than a letter, digit or '_'
 * made '_'. The prefix keeps a function called `bind`, `malloc` or `main` from colliding with a
 * symbol of the C library or of the program that loads the module. Once per module it exports
 * the table `const KilnModuleInfo kiln_module_info`, which lists the functions by their names
 * (as the compiler was given them) with their signatures and entry points, gives the module's
 * error message accessor and the slot where a loader installs the runtime (the thread pool).
 * A loader finds a function by its name in that table; everything else a module defines is
 * internal to it, and the table refers to the module's own definitions.
 *
 * The entry point checks its arguments (count, null pointers, rank, dtype, shape, strides,
 * 64-byte alignment of the data, consistency of symbolic sizes) before it touches memory; on any
 * failure it returns a nonzero KilnStatus and the module's last_error() names the function, the
 * argument and what was wrong.
 *
 * The layout of every struct here is fixed: fields are only ever added at the end, together
 * with a new KILN_ABI_VERSION. This header is plain C99 and C++.
 */
#ifndef KILN_DEPLOY_C_ABI_H_
#define KILN_DEPLOY_C_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_VERSION 1

/* The exported symbol holding the module table. */
#define KILN_MODULE_INFO_SYMBOL "kiln_module_info"
/* The prefix of each function's exported entry point: "kiln_fn_<name>". */
#define KILN_FUNCTION_SYMBOL_PREFIX "kiln_fn_"

/* Element type codes (the same numbering as kiln::deploy::DType::Code). */
enum KilnDTypeCode { kKilnInt = 0, kKilnUInt = 1, kKilnFloat = 2 };

/* Status codes returned by entry points and by KilnParallelFor. */
enum KilnStatus {
  kKilnOk = 0,
  kKilnErrorArgument = 1, /* bad argument list: count, null, rank, dtype, shape, strides, alignment */
  kKilnErrorAssert = 2,   /* an assertion in the kernel failed */
  kKilnErrorAlloc = 3     /* a heap allocation failed */
};

/* One tensor argument. `shape` has `ndim` entries (it may be NULL when ndim is 0); `strides` are
 * in elements, and NULL means compact row-major. `data` must be 64-byte aligned. */
typedef struct KilnArg {
  void *data;
  int32_t ndim;
  const int64_t *shape;
  const int64_t *strides;
  uint8_t dtype_code;
  uint8_t dtype_bits;
  uint16_t dtype_lanes;
} KilnArg;

typedef int32_t (*KilnPackedFunc)(const KilnArg *args, int32_t num_args);

/* The body of a parallel loop: runs iterations [begin, end) with the captured variables in
 * `closure`. Returns 0, or a nonzero KilnStatus (the module's last_error() says why). */
typedef int32_t (*KilnParallelBody)(int64_t begin, int64_t end, void *closure);

/* What a loader hands to a module. A module without a runtime runs parallel loops serially. */
typedef struct KilnRuntimeApi {
  int32_t abi_version;
  /* Runs body over [0, n) split into chunks on the runtime's threads and returns 0, or the
   * first nonzero status a chunk returned. A call from inside a body runs serially. */
  int32_t (*parallel_for)(KilnParallelBody body, int64_t n, void *closure);
} KilnRuntimeApi;

/* One parameter of a compiled function. shape[d] is -1 where the extent is symbolic. */
typedef struct KilnParamInfo {
  const char *name;
  int32_t ndim;
  uint8_t dtype_code;
  uint8_t dtype_bits;
  uint16_t dtype_lanes;
  const int64_t *shape;
} KilnParamInfo;

typedef struct KilnFunctionInfo {
  const char *name;      /* the function's name */
  const char *signature; /* e.g. "gemm(A: float32[n, k], B: float32[k, m], C: float32[n, m])" */
  KilnPackedFunc func;
  int32_t num_params;
  const KilnParamInfo *params;
} KilnFunctionInfo;

typedef struct KilnModuleInfo {
  int32_t abi_version;
  int32_t num_functions;
  const KilnFunctionInfo *const *functions;
  /* The message of the latest failure of any function of this module ("" if none). */
  const char *(*last_error)(void);
  /* The module's runtime slot: a loader stores its KilnRuntimeApi here before the first call. */
  const KilnRuntimeApi **runtime_api;
  /* The target the module was compiled for, e.g. "llvm -mcpu=znver4". */
  const char *target;
} KilnModuleInfo;

/* Provided by the Kiln runtime (kiln_deploy). */
int32_t KilnParallelFor(KilnParallelBody body, int64_t n, void *closure);
const KilnRuntimeApi *KilnGetRuntimeApi(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_DEPLOY_C_ABI_H_ */

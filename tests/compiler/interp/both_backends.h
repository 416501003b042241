#pragma once
// Test helpers: tensors from values and back, and running one lowered function through both the
// interpreter and the C back end on copies of the same arguments.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "compiler/codegen/c/c_module.h"
#include "compiler/interp/interpreter.h"
#include "compiler/ir/function.h"
#include "compiler/ir/op.h"
#include "deploy/tensor.h"

namespace kiln::test {

template <typename T>
deploy::Tensor make_tensor(std::vector<int64_t> shape, const std::vector<T> &values) {
  deploy::Tensor t = deploy::Tensor::empty(std::move(shape), deploy::DType::of<T>());
  t.copy_from(values.data(), values.size() * sizeof(T));
  return t;
}

// A tensor of `shape` filled with `fill`.
template <typename T>
deploy::Tensor filled(std::vector<int64_t> shape, T fill) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return make_tensor<T>(std::move(shape), std::vector<T>(static_cast<size_t>(n), fill));
}

// A tensor of raw 16-bit words (float16 storage).
inline deploy::Tensor half_tensor(std::vector<int64_t> shape, const std::vector<uint16_t> &bits) {
  deploy::Tensor t = deploy::Tensor::empty(std::move(shape), deploy::DType{deploy::DType::Float, 16, 1});
  t.copy_from(bits.data(), bits.size() * 2);
  return t;
}

template <typename T>
std::vector<T> values(const deploy::Tensor &t) {
  std::vector<T> v(t.nbytes() / sizeof(T));
  t.copy_to(v.data(), t.nbytes());
  return v;
}

inline deploy::Tensor clone(const deploy::Tensor &t) {
  deploy::Tensor c = deploy::Tensor::empty(t.shape(), t.dtype());
  std::vector<char> bytes(t.nbytes());
  t.copy_to(bytes.data(), bytes.size());
  c.copy_from(bytes.data(), bytes.size());
  return c;
}

// A lowered function with the given params, size variables and body.
inline ir::LoweredFunc make_func(const std::string &name, std::vector<ir::Buffer> params,
                                 std::vector<ir::Var> size_vars, ir::Stmt body) {
  ir::LoweredFunc f;
  f.name = name;
  f.params = std::move(params);
  f.size_vars = std::move(size_vars);
  f.body = std::move(body);
  return f;
}

// A buffer naming the memory of an Allocate statement (its data variable is the one to allocate).
inline ir::Buffer alloc_buffer(const std::string &name, ir::DataType t, const std::string &scope = "local") {
  return ir::make_buffer(name, t, {}, scope);
}

inline ir::Expr load(const ir::Buffer &b, ir::Expr index, ir::Expr predicate = ir::Expr()) {
  const int lanes = index.type().lanes();
  return ir::LoadNode::make(b.dtype.with_lanes(lanes), b.data, std::move(index), std::move(predicate));
}

inline ir::Stmt store(const ir::Buffer &b, ir::Expr value, ir::Expr index, ir::Expr predicate = ir::Expr()) {
  return ir::StoreNode::make(b.data, std::move(value), std::move(index), std::move(predicate));
}

inline ir::Stmt loop(const ir::Var &v, ir::Expr extent, ir::Stmt body, ir::ForKind kind = ir::ForKind::Serial,
                     const std::string &tag = "") {
  return ir::ForNode::make(v, 0, std::move(extent), kind, std::move(body), tag);
}

// The outputs of both back ends, each on its own copy of the arguments.
struct BothResults {
  std::vector<deploy::Tensor> interp;
  std::vector<deploy::Tensor> c;
};

// Runs f through interp::run and a compiled CModule; expects both to succeed.
inline BothResults run_both(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args) {
  BothResults r;
  for (const auto &a : args) {
    r.interp.push_back(clone(a));
    r.c.push_back(clone(a));
  }
  interp::run(f, r.interp);
  codegen::CModule m(f, KILN_C_COMPILER);
  const int32_t status = m.call(r.c);
  EXPECT_EQ(status, 0) << m.last_error();
  return r;
}

// Calls check(outputs, "interpreter") and check(outputs, "C").
inline void for_both(const BothResults &r,
                     const std::function<void(const std::vector<deploy::Tensor> &, const std::string &)> &check) {
  {
    SCOPED_TRACE("interpreter");
    check(r.interp, "interpreter");
  }
  {
    SCOPED_TRACE("C back end");
    check(r.c, "C");
  }
}

// Expects `what()` of the exception thrown by f to contain every one of `parts`.
template <typename Error, typename F>
void expect_error(F f, const std::vector<std::string> &parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const Error &e) {
    for (const auto &p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace kiln::test

#pragma once
// Runs statements of the pass tests with the reference interpreter (interp::execute) on buffers
// given as vectors of numbers, so that a pass's output can be checked to compute what its input
// computed. It also counts the lanes stored to those buffers, so that a test sees a pass that
// writes an element more often than its input did (iterations run by both a main loop and its
// tail).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/interp/evaluate.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/function.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::ir::testing {

class StmtRunner {
 public:
  // The contents of the buffers by their variables, as numbers; each buffer holds elements of its
  // variable's pointee type (float32 or int32) while the statement runs.
  std::unordered_map<const VariableNode *, std::vector<double>> buffers;
  int64_t stores = 0;  // lanes stored to the buffers by the last run()

  void set(const Var &v, int64_t value) { bindings_.set(v, value); }

  // The contents of buffer `v`, first set to `size` zeros when a size is given.
  std::vector<double> &buffer(const Var &v, size_t size = 0) {
    vars_.emplace(v.get(), v);
    auto &b = buffers[v.get()];
    if (size) b.assign(size, 0.0);
    return b;
  }

  // Runs `s` on the buffers; an out-of-bounds access throws kiln::RuntimeError.
  void run(const Stmt &s) {
    interp::Bindings bindings = bindings_;
    std::unordered_map<const VariableNode *, std::pair<deploy::Tensor, deploy::Tensor>> tensors;
    CountStores counted;
    for (const auto &[node, values] : buffers) {
      const Var &v = vars_.at(node);
      deploy::Tensor data = make_tensor(v->pointee, values);
      deploy::Tensor count = make_tensor(Int(32), std::vector<double>(values.size(), 0.0));
      Var count_var = make_buffer(v.name() + ".stores", Int(32), {Expr(1)}).data;
      counted.counters.emplace(node, count_var);
      bindings.bind(v, data).bind(count_var, count);
      tensors.emplace(node, std::make_pair(data, count));
    }
    interp::execute(counted.mutate(s), bindings);
    stores = 0;
    for (auto &[node, values] : buffers) {
      values = read_tensor(tensors.at(node).first);
      for (double c : read_tensor(tensors.at(node).second)) stores += static_cast<int64_t>(c);
    }
  }

 private:
  // Follows every store to a counted buffer with an increment of the store counts of the elements
  // it writes (same index, same predicate).
  class CountStores : public IRMutator {
   public:
    std::unordered_map<const VariableNode *, Var> counters;
    using IRMutator::mutate;

   protected:
    using IRMutator::visit;
    Stmt visit(const StoreNode *op, const Stmt &self) override {
      auto it = counters.find(op->buffer_var.get());
      if (it == counters.end()) return self;
      const int lanes = op->index.type().lanes();
      const Expr one = lanes == 1 ? Expr(1) : BroadcastNode::make(Expr(1), lanes);
      const Expr count = LoadNode::make(Int(32, lanes), it->second, op->index, op->predicate) + one;
      return BlockNode::make(self, StoreNode::make(it->second, count, op->index, op->predicate));
    }
  };

  static deploy::Tensor make_tensor(DataType t, const std::vector<double> &values) {
    deploy::Tensor r = deploy::Tensor::empty({static_cast<int64_t>(values.size())}, ir::to_deploy_dtype(t));
    for (size_t i = 0; i < values.size(); ++i) {
      if (t == Float(32)) {
        r.data_as<float>()[i] = static_cast<float>(values[i]);
      } else if (t == Int(32)) {
        r.data_as<int32_t>()[i] = static_cast<int32_t>(values[i]);
      } else {
        throw std::invalid_argument("StmtRunner: buffers of " + t.to_string() + " are not supported");
      }
    }
    return r;
  }

  static std::vector<double> read_tensor(const deploy::Tensor &t) {
    std::vector<double> r(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < r.size(); ++i) {
      r[i] = t.dtype() == deploy::DType::of<float>() ? t.data_as<float>()[i] : t.data_as<int32_t>()[i];
    }
    return r;
  }

  interp::Bindings bindings_;
  std::unordered_map<const VariableNode *, Var> vars_;
};

}  // namespace kiln::ir::testing

#pragma once
// The post-dominator analysis of operator fusion (fuse_ops.cpp), used by fuse_epilogues and
// fuse_elementwise: the dataflow graph's post-dominator tree with the graph outputs as the exit,
// the region between a node and its immediate post-dominator (the one grouping rule of both
// passes), and an elementwise region as one epilogue expression (compiler/ops/epilogue.h,
// {"op":"expr"}).
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/passes/rewriter.h"
#include "contracts/json.h"

namespace kiln::graph::passes {

// The caps of a fused group (fuse_epilogues, fuse_elementwise, fuse_injective): its nodes, and the
// tensor inputs of its kernel.
constexpr size_t kMaxGroupNodes = 32;
constexpr size_t kMaxGroupInputs = 16;

// The immediate post-dominator of every node of `g`, by index; g.nodes().size() stands for the
// exit (a node whose outputs are graph outputs or unread leads there).
std::vector<size_t> immediate_post_dominators(const Graph &g);

// The readers of every value of `g`, by value index: the nodes reading it, in graph order.
std::vector<std::vector<size_t>> value_readers(const Graph &g);

// The nodes on the paths from the values `from` to `ipdom`, a post-dominator of their producer:
// every node reachable from `from` before `ipdom`, and `ipdom`, in graph order (`ipdom` last),
// when `accept` takes each of them and there are at most `max_nodes`; nullopt otherwise, and when
// a path passes `ipdom` by (it is then no post-dominator of `from`).
std::optional<std::vector<size_t>> post_dominated_region(const Graph &g,
                                                         const std::vector<std::vector<size_t>> &readers,
                                                         const std::vector<ValueId> &from, size_t ipdom,
                                                         const std::function<bool(size_t)> &accept, size_t max_nodes);

// TVM's grouping rule on the post-dominator tree, from the outputs back: a node `fusable` takes
// joins the group of its immediate post-dominator when every node between them is in that group
// (the group's inner values are then read only inside it, and a graph output ends a group, its
// post-dominator being the exit) and the bigger group has at most `max_nodes` nodes and `fits`;
// otherwise it starts a group when `can_start` takes it (else it stays out of every group). The group of every node (-1
// for the others) and the groups' members; the last member of a group is its root.
struct FusionGroups {
  std::vector<int> group_of;
  std::vector<std::set<size_t>> groups;
};
FusionGroups post_dominator_groups(const Graph &g, const std::function<bool(size_t)> &fusable,
                                   const std::function<bool(size_t)> &can_start, size_t max_nodes,
                                   const std::function<bool(const std::set<size_t> &)> &fits);

// A group's members written as the {"nodes": [...]} subgraph of one fused node (FusedElementwise,
// FusedInjective): an operand is {"n": k}, the output of the k-th member added, or {"i": k}, the
// fused node's k-th input, added on its first use; the pass writes constants its own way.
class GroupSubgraph {
 public:
  GroupSubgraph(const Graph &g, Rewriter &rw, const std::string &op, const std::string &name);
  // {"n": k} when `v` is the output of a member already added.
  std::optional<contracts::Json> member(ValueId v) const;
  // {"i": k}: `v` (of the old graph) as an input of the fused node.
  contracts::Json input(ValueId v);
  // Member `m` (a node index of the old graph), described by `desc`, after those added before.
  void add(size_t m, contracts::Json desc);
  // Adds the fused node; its output replaces the output of `root`, the last member.
  void finish(size_t root);

 private:
  const Graph &g_;
  Rewriter &rw_;
  Node fused_;
  std::map<ValueId, int> input_index_;
  std::map<size_t, int> node_index_;
  contracts::Json nodes_ = contracts::Json::array();
};

// Whether node `n` may be a member of a FusedElementwise group (op_fused.cpp's ops, no float16 and
// no bool but Where's condition).
bool elementwise_fusable(const Graph &g, const Node &n);
// Whether a value of this dtype may flow through a fused group (not float16, not bool).
bool fusable_dtype(ir::DataType t);

// An elementwise region of the dataflow graph as one expression descriptor.
struct ExprRegion {
  std::vector<size_t> nodes;      // the region's nodes in graph order; the last one is the post-dominator
  contracts::Json descriptor;     // {"op":"expr",...} over x = the region's input value
  std::vector<ValueId> extras;    // the descriptor's inputs (old graph), in order
  std::vector<bool> per_channel;  // whether extra k is a per-channel constant (its data is [channels])
  // Per extra: for a {"broadcast":dims} input, dims (the anchor's output shape with some axes 1:
  // the shape the extra is passed with); empty for the others.
  std::vector<std::vector<int64_t>> broadcast;
};

// The shape in which a tensor of shape `in`, broadcast (numpy's rules) to `out`, is read by an
// anchor whose output is `out`'s elements as shape `anchor` (the same elements in the same order,
// `out`'s axes merged into runs: [B, S, N] as [B*S, N]): per anchor axis its extent or 1. nullopt
// when `in` does not broadcast to `out`, or an anchor axis merges axes `in` has with axes it
// broadcasts (so no such shape reads it).
std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                                                    const std::vector<int64_t> &anchor);

// The region from value `x` (an anchor's output, of type t, channel axis `channel_axis`, computed
// by the anchor as shape `anchor_shape`) to the immediate post-dominator `ipdom` of its producer:
// every node reachable from `x` before `ipdom`, and `ipdom`, when each is an elementwise or
// broadcast op the expression language has, keeps the output's type, and reads only x, values of
// the region, scalar constants, tensors of the output's type, per-channel constants and tensors
// that broadcast to the output in a shape the anchor can read (broadcast_shape); at most
// `max_nodes` nodes, `max_extras` extra inputs and 64 expression nodes, none of them in `taken`.
// nullopt otherwise.
std::optional<ExprRegion> elementwise_region(const Graph &g, ValueId x, size_t ipdom, int channel_axis,
                                             const std::vector<int64_t> &anchor_shape, const std::vector<bool> &taken,
                                             size_t max_nodes, size_t max_extras);

// Expression descriptor `second` applied after `first` as one descriptor (second's x replaced by
// first's expression, its inputs numbered after first's), or nullopt when that would exceed the
// expression's size limit.
std::optional<contracts::Json> compose_exprs(const contracts::Json &first, const contracts::Json &second);

}  // namespace kiln::graph::passes

#pragma once
// Producer: what the IR knows of the producer of a tensor that it reads (ProducerLoad), writes
// (ProducerStore) and realizes (ProducerRealize) before storage flattening. The tensor-expression
// layer implements it with its operations (te::OperationNode); the IR needs only a name to print,
// the number of outputs and their element types. Producers are compared by identity.
#include <memory>
#include <string>

#include "compiler/ir/type.h"

namespace kiln::ir {

class Producer {
 public:
  virtual ~Producer() = default;
  Producer(const Producer &) = delete;
  Producer &operator=(const Producer &) = delete;

  // The name under which the printer and error messages show the producer's tensors.
  virtual const std::string &producer_name() const = 0;
  virtual int num_outputs() const = 0;
  // The element type of output `value_index`.
  virtual DataType output_dtype(int value_index) const = 0;

 protected:
  Producer() = default;
};

// How IR nodes hold a producer; two references are the same producer when they point to the same
// object.
using ProducerRef = std::shared_ptr<const Producer>;

// The name of output `value_index`: the producer's name, with ".v<value_index>" appended when it
// has several outputs ("C", "argmax.v1").
inline std::string producer_output_name(const Producer &p, int value_index) {
  if (p.num_outputs() <= 1) return p.producer_name();
  return p.producer_name() + ".v" + std::to_string(value_index);
}

}  // namespace kiln::ir

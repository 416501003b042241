#pragma once
// Schedule to loop nest: every stage becomes a nest of loops over its leaf iteration variables
// that stores its values (ProducerStore) into a realized region (ProducerRealize); attached
// stages are placed inside their consumer's loop, root stages before their consumers.
#include "compiler/lower/inline.h"
#include "compiler/lower/message_passing.h"

namespace kiln::lower {

ir::Stmt schedule_ops(const te::Schedule &sch, const BoundMap &bounds, const BodyMap &bodies,
                      const InlinedArgs &inlined_args = {});

}  // namespace kiln::lower

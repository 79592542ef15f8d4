// Runs a forward either eagerly or as a captured device graph keyed by its shape. The runtime
// owns the static inputs; the runner owns capture and replay. The CPU backend runs everything
// eagerly; the CUDA backend captures CUDA graphs (backends/cuda/cuda_graph.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "ops/workspace.h"

namespace tandem {

class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Runs fn (eager warm-up, capture) or replays the graph of `key`. Everything fn reads must
  // stay at the same addresses for a key; values may change. Afterwards the workspace's next
  // allocation lands past the forward's outputs, which stay valid until the next run().
  virtual void run(int64_t key, const std::function<void(Workspace&)>& fn) = 0;
};

// The backend's runner for forwards allocating from ws (graphs off: always eager).
std::unique_ptr<GraphRunner> make_graph_runner(Workspace& ws, bool disable_graphs);

}  // namespace tandem

#include "runtime/geometry.h"

#include <algorithm>
#include <cstring>

#include "runtime/scheduler.h"

namespace tandem {

EngineGeometry engine_geometry(const EngineOptions& o, const ModelConfig& c, ProcessGroup* group) {
  EngineGeometry g;
  g.draft_steps = o.spec.enabled() ? o.spec.max_depth() : 0;
  g.num_pages = o.num_pages > 0 ? o.num_pages : pages_for(o.max_total_tokens, o.page_size);
  if (group && group->world() > 1) {
    Bytes mine(sizeof(int64_t));
    std::memcpy(mine.data(), &g.num_pages, sizeof(int64_t));
    for (const Bytes& b : group->all_gather(mine)) {
      int64_t n = 0;
      std::memcpy(&n, b.data(), std::min(b.size(), sizeof(int64_t)));
      g.num_pages = std::min(g.num_pages, n);
    }
  }
  // The longest prompt + output: the model's or the flag's, within the KV capacity less a
  // round's extra positions.
  g.context_length = std::min(o.context_length > 0 ? o.context_length : c.max_position_embeddings,
                              g.num_pages * o.page_size - (g.draft_steps + 1));
  return g;
}

}  // namespace tandem

#include "runtime/follower.h"

#include "core/device.h"
#include "core/log.h"
#include "runtime/geometry.h"
#include "runtime/model_runner.h"
#include "runtime/output_processor.h"
#include "runtime/spec_worker.h"
#include "runtime/step_executor.h"
#include "runtime/step_message.h"

namespace tandem {

void run_follower(std::shared_ptr<const Model> model, EngineOptions opt, ProcessGroup& group,
                  ConstraintFactory constraints) {
  opt.validate();
  device_interface(model->device().type).make_current(model->device());
  const EngineGeometry geo = engine_geometry(opt, model->config(), &group);
  ModelRunner runner(model, opt, geo.num_pages, geo.context_length, geo.draft_steps);
  OutputProcessor out(geo.draft_steps);  // counts only; nothing is streamed from here
  std::unique_ptr<SpecWorker> spec;
  if (geo.draft_steps > 0)
    spec = std::make_unique<SpecWorker>(runner, out, opt.spec, opt.profile_spec_phases,
                                        opt.max_prefill_tokens);
  StepExecutor exec(runner, out, spec.get());
  // Rank 0's engine runs the same warm-up forwards (same options, geometry and token ids), so
  // their collectives pair up.
  if (const int64_t tokens = opt.warm_up_tokens_for(model->device()); tokens > 0)
    runner.warm_up(tokens, opt.max_running_requests);
  log_info("rank {} of {}: ready ({} KV pages)", group.rank(), group.world(), geo.num_pages);
  FollowerSequences seqs(std::move(constraints));
  for (;;) {
    Bytes msg;
    group.broadcast(msg);
    const FollowerSequences::Step step = seqs.apply(msg);
    if (step.stop) return;
    runner.begin_step();
    exec.run(step.plan);
  }
}

}  // namespace tandem

#include "runtime/step_trace.h"

#include <cstdlib>

#include "core/log.h"
#include "runtime/scheduler.h"

namespace tandem {

StepTrace::StepTrace() {
  const char* path = std::getenv("TANDEM_STEP_TRACE");
  if (!path || !*path) return;
  file_.reset(std::fopen(path, "a"));
  if (!file_) {
    log_error("TANDEM_STEP_TRACE: cannot open {} for appending; the step trace is off", path);
    return;
  }
  using namespace std::chrono;
  const int64_t unix_now =
      duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  const int64_t steady_now = duration_cast<microseconds>(Clock::now().time_since_epoch()).count();
  unix_us_at_steady_zero_ = unix_now - steady_now;
  std::fputs("# unix_us kind prefill_seqs prefill_tokens decode_seqs waiting running busy_us\n",
             file_.get());
}

void StepTrace::end(const StepPlan& plan, int64_t waiting, int64_t running) {
  if (!on() || plan.kind == StepPlan::Kind::kIdle) return;
  using namespace std::chrono;
  const Clock::time_point now = Clock::now();
  int64_t prefill_tokens = 0, prefill_seqs = 0, decode_seqs = 0;
  if (plan.kind == StepPlan::Kind::kPrefill) {
    for (const ScheduledChunk& c : plan.prefill) {
      // A mixed step carries each decoding sequence as a one-token chunk at its end.
      if (c.start >= c.seq->prompt_len && c.end - c.start == 1)
        ++decode_seqs;
      else
        ++prefill_seqs, prefill_tokens += c.end - c.start;
    }
  } else {
    decode_seqs = static_cast<int64_t>(plan.decode.size());
  }
  const int64_t start_us =
      unix_us_at_steady_zero_ + duration_cast<microseconds>(begin_.time_since_epoch()).count();
  std::fprintf(file_.get(), "%lld %s %lld %lld %lld %lld %lld %lld\n",
               static_cast<long long>(start_us),
               plan.kind == StepPlan::Kind::kPrefill ? "prefill" : "decode",
               static_cast<long long>(prefill_seqs), static_cast<long long>(prefill_tokens),
               static_cast<long long>(decode_seqs), static_cast<long long>(waiting),
               static_cast<long long>(running),
               static_cast<long long>(duration_cast<microseconds>(now - begin_).count()));
}

}  // namespace tandem

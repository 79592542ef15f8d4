#include "runtime/spec_depth_trace.h"

#include <cstdlib>

#include "core/log.h"

namespace tandem {

SpecDepthTrace::SpecDepthTrace(const SpecDepthOptions& o) {
  const char* path = std::getenv("TANDEM_SPEC_DEPTH_TRACE");
  if (!path || !*path) return;
  file_.reset(std::fopen(path, "a"));
  if (!file_) {
    log_error("TANDEM_SPEC_DEPTH_TRACE: cannot open {} for appending; the depth trace is off",
              path);
    return;
  }
  std::fprintf(file_.get(), "e %lld %lld %d %d %d %g\n", static_cast<long long>(o.max_depth),
               static_cast<long long>(o.initial_depth), o.adaptive ? 1 : 0, o.batch_fill ? 1 : 0,
               o.accept_relax ? 1 : 0, o.catch_up_alpha);
}

void SpecDepthTrace::choose(int64_t batch, int64_t lag_tokens, int64_t remaining_tokens,
                            int64_t depth, int64_t max_remaining_tokens) {
  if (!on()) return;
  std::fprintf(file_.get(), "c %lld %lld %lld %lld %lld\n", static_cast<long long>(batch),
               static_cast<long long>(lag_tokens), static_cast<long long>(remaining_tokens),
               static_cast<long long>(depth), static_cast<long long>(max_remaining_tokens));
}

void SpecDepthTrace::observe(int64_t depth, int64_t batch, double seconds, double catch_up_seconds,
                             int64_t catch_up_tokens, const std::vector<int64_t>& accepted,
                             Step step) {
  if (!on()) return;
  // Microsecond-resolution times: the policy's decisions turn on differences of a few percent of
  // steps that take a few hundred microseconds.
  const char kind = step == Step::kPinned   ? 'p'
                    : step == Step::kForced ? 'f'
                    : step == Step::kBuilt  ? 'g'
                                            : 'o';
  std::fprintf(file_.get(), "%c %lld %lld %.9f %.9f %lld", kind, static_cast<long long>(depth),
               static_cast<long long>(batch), seconds, catch_up_seconds,
               static_cast<long long>(catch_up_tokens));
  for (int64_t k : accepted) std::fprintf(file_.get(), " %lld", static_cast<long long>(k));
  std::fputc('\n', file_.get());
}

void SpecDepthTrace::settle() {
  if (on()) std::fputs("s\n", file_.get());
}

void SpecDepthTrace::prompt_reads(double seconds, int64_t positions) {
  if (!on() || positions <= 0) return;
  std::fprintf(file_.get(), "r %.9f %lld\n", seconds, static_cast<long long>(positions));
}

void SpecDepthTrace::finish(int64_t tokens) {
  if (on()) std::fprintf(file_.get(), "x %lld\n", static_cast<long long>(tokens));
}

void SpecDepthTrace::change(const std::string& text) {
  if (on()) std::fprintf(file_.get(), "# %s\n", text.c_str());
}

}  // namespace tandem

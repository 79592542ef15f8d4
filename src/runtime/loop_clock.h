// Where the engine thread's wall time goes, phase by phase: every moment of the loop is charged
// to exactly one phase, so the phases sum to the thread's lifetime. It tells a slower step apart
// by cause: host work before the launch (prepare), waiting for the device, committing tokens,
// handing them to the streams (send), or the engine simply having nothing to do (wait). A lap
// costs one steady_clock read.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>

namespace tandem {

enum class LoopPhase : size_t {
  kWait,      // blocked for work (no request running or waiting)
  kSchedule,  // taking new requests, aborts and flushes; planning the step and its depth
  kPrepare,   // a plain decode step's host inputs and its graph launch
  kDevice,    // until the step's tokens are on the host (all of a prefill or speculative step)
  kCommit,    // appending a plain decode step's tokens, stop rules
  kSend,      // pushing each request's new tokens to its stream and waking its reader
  kPublish,   // the gauges other threads read
  kCount
};

inline constexpr std::array<const char*, static_cast<size_t>(LoopPhase::kCount)> kLoopPhaseNames = {
    "wait", "schedule", "prepare", "device", "commit", "send", "publish"};

class LoopClock {
 public:
  using Clock = std::chrono::steady_clock;
  LoopClock() : last_(Clock::now()) {}

  // Charges the time since the previous lap to `phase`.
  void lap(LoopPhase phase) {
    const Clock::time_point now = Clock::now();
    seconds_[static_cast<size_t>(phase)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  // Takes the seconds charged since the previous take.
  std::array<double, static_cast<size_t>(LoopPhase::kCount)> take() {
    auto s = seconds_;
    seconds_ = {};
    return s;
  }

 private:
  Clock::time_point last_;
  std::array<double, static_cast<size_t>(LoopPhase::kCount)> seconds_{};
};

}  // namespace tandem

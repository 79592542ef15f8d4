// Adapts a Generation to a streamed HTTP body: each poll's deltas are formatted by the route
// (SSE chunks), completion by another callback (the final chunks, or the whole JSON body of a
// non-streamed response). A cancelled body aborts the engine requests, returning their KV pages.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/http_types.h"

namespace tandem::server {

class GenerationBody : public BodyStream {
 public:
  using OnStart = std::function<void(std::string& out)>;
  using OnDeltas = std::function<void(const std::vector<ChoiceDelta>&, std::string& out)>;
  using OnDone = std::function<void(std::string& out)>;

  GenerationBody(std::shared_ptr<Generation> gen, OnStart on_start, OnDeltas on_deltas,
                 OnDone on_done)
      : gen_(std::move(gen)),
        on_start_(std::move(on_start)),
        on_deltas_(std::move(on_deltas)),
        on_done_(std::move(on_done)) {}

  bool next(std::string& out, std::chrono::milliseconds wait) override {
    if (finished_) return false;
    if (!started_) {
      started_ = true;
      if (on_start_) {
        on_start_(out);
        if (!out.empty()) return true;  // send the opening chunk before waiting for tokens
      }
    }
    std::vector<ChoiceDelta> deltas;
    gen_->poll(deltas, wait);
    if (!deltas.empty() && on_deltas_) on_deltas_(deltas, out);
    if (!gen_->done()) return true;
    on_done_(out);
    finished_ = true;
    return false;
  }

  void cancel() override { gen_->abort(); }

  bool set_ready_callback(std::function<void()> ready) override {
    return gen_->set_notify(std::move(ready));
  }

 private:
  std::shared_ptr<Generation> gen_;
  OnStart on_start_;
  OnDeltas on_deltas_;
  OnDone on_done_;
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace tandem::server

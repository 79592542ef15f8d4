// An in-process stand-in for a serving engine: SGLang's /generate and OpenAI's completion routes
// streaming on a known schedule, /metrics speculative counters that move while it serves, and
// the info routes the benchmark reads. Lets the whole driver run without a model.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace tandem::bench::testing {

class FakeServer {
 public:
  // Schedule of every stream: the first chunk (one token, as prefill gives) after first_delay_s,
  // then a chunk every gap_s carrying tokens_per_chunk tokens as if a verify round accepted
  // tokens_per_chunk - 1 drafts. Requests for at most 32 tokens (bench_serving's warm-up) get
  // one token per chunk instead, so warm-up traffic has a different accept length (1.0).
  double first_delay_s = 0.03;
  double gap_s = 0.015;
  int64_t tokens_per_chunk = 3;
  bool serve_metrics = true;        // expose the counters on /metrics
  bool meta_spec = true;            // put spec_verify_ct in /generate's meta_info
  bool usage_every_chunk = false;   // OpenAI routes: usage on every chunk, else only at the end
  double server_info_accept = 9.5;  // /get_server_info's since-start figure (0: absent)

  // Counters as if the server had served traffic with accept length 1.5 before the benchmark.
  std::atomic<int64_t> verify_steps{1000};
  std::atomic<int64_t> accepted_tokens{500};
  // Accepted drafts per draft position (3 draft steps): a round that accepts j drafts accepts
  // positions 0 .. j-1.
  std::atomic<int64_t> accepted_per_position[3] = {400, 100, 0};
  std::atomic<int> in_flight{0}, max_in_flight{0};
  std::atomic<int> generate_calls{0}, flush_calls{0};

  std::mutex mu;
  std::vector<nlohmann::json> bodies;  // every generation request body received

  FakeServer() {
    using json = nlohmann::json;
    svr_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    svr_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                      "application/json");
    });
    svr_.Get("/get_model_info", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"model_path":"/nowhere/model","tokenizer_path":"/nowhere/tok"})",
                      "application/json");
    });
    svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      if (!serve_metrics) {
        res.status = 404;
        return;
      }
      std::string t;
      t += "# HELP tandem:spec_verify_steps_total Verify rounds\n";
      t += "# TYPE tandem:spec_verify_steps_total counter\n";
      // As Tandem's server: the same counters under vLLM's names too, with labels.
      const std::string v = std::to_string(verify_steps.load()),
                        a = std::to_string(accepted_tokens.load());
      t += "vllm:spec_decode_num_drafts_total{model_name=\"fake\"} " + v + "\n";
      t += "vllm:spec_decode_num_accepted_tokens_total{model_name=\"fake\"} " + a + "\n";
      t += "tandem:spec_verify_steps_total{model_name=\"fake\"} " + v + "\n";
      t += "tandem:spec_accepted_tokens_total{model_name=\"fake\"} " + a + "\n";
      for (int p = 0; p < 3; ++p) {
        const std::string n = std::to_string(accepted_per_position[p].load());
        t += "tandem:spec_accepted_tokens_per_pos_total{model_name=\"fake\",position=\"" +
             std::to_string(p) + "\"} " + n + "\n";
        t += "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(p) +
             "\"} 7\n";
      }
      t += "tandem:spec_accept_length 7.0\n";
      t += "tandem:generation_tokens_total 99\n";
      res.set_content(t, "text/plain; version=0.0.4");
    });
    svr_.Get("/get_server_info", [this](const httplib::Request&, httplib::Response& res) {
      json j = {{"version", "fake"}};
      if (server_info_accept > 0)
        j["internal_states"] = json::array({{{"avg_spec_accept_length", server_info_accept}}});
      res.set_content(j.dump(), "application/json");
    });
    svr_.Post("/flush_cache", [this](const httplib::Request&, httplib::Response& res) {
      ++flush_calls;
      res.set_content("Cache flushed.", "text/plain");
    });
    svr_.Post("/generate", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      serve(req, res, body, Route::kGenerate,
            body["sampling_params"]["max_new_tokens"].get<int64_t>(), body.value("stream", false),
            body.value("text", std::string()));
    });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      serve(req, res, body, Route::kCompletions, body["max_tokens"].get<int64_t>(),
            body.value("stream", false), body.value("prompt", std::string()));
    });
    svr_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      serve(req, res, body, Route::kChat, body["max_completion_tokens"].get<int64_t>(),
            body.value("stream", false), body["messages"][0]["content"].get<std::string>());
    });
    // cpp-httplib listens with a backlog of 5: a burst of connections overflows the accept
    // queue and some are reset. Re-listening on the bound socket raises the backlog (Linux).
    svr_.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listen_fd_ = sock;
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }

  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  enum class Route { kGenerate, kCompletions, kChat };

  struct Stream {
    int64_t n = 0, done = 0, rounds = 0, k = 1;
    bool role_sent = false;
    std::string text;
  };

  static void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

  // Advances a stream by one chunk and counts the verify round it stands for.
  int64_t next_chunk(Stream& s) {
    sleep_s(s.done == 0 ? first_delay_s : gap_s);
    const int64_t k = s.done == 0 ? 1 : std::min(s.k, s.n - s.done);
    if (s.done > 0) {
      ++s.rounds;
      ++verify_steps;
      accepted_tokens += k - 1;
      for (int64_t p = 0; p < k - 1 && p < 3; ++p) ++accepted_per_position[p];
    }
    s.done += k;
    for (int64_t i = 0; i < k; ++i) s.text += "tok ";
    return k;
  }

  void serve(const httplib::Request&, httplib::Response& res, const nlohmann::json& body,
             Route route, int64_t n, bool stream, const std::string& prompt) {
    using json = nlohmann::json;
    {
      std::lock_guard<std::mutex> lock(mu);
      bodies.push_back(body);
    }
    ++generate_calls;
    if (prompt.find("FAIL") != std::string::npos) {
      res.status = 500;
      res.set_content(R"({"object":"error","message":"injected failure"})", "application/json");
      return;
    }
    const int now = ++in_flight;
    int prev = max_in_flight.load();
    while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
    }
    auto s = std::make_shared<Stream>();
    s->n = n;
    s->k = n > 32 ? tokens_per_chunk : 1;
    auto event = [this, route](const Stream& st, const std::string& delta, bool last) {
      json e;
      if (route == Route::kGenerate) {
        json meta = {{"completion_tokens", st.done}, {"prompt_tokens", 7}};
        if (meta_spec) meta["spec_verify_ct"] = st.rounds;
        if (last) meta["finish_reason"] = {{"type", "length"}, {"length", st.n}};
        e = {{"text", st.text}, {"meta_info", meta}};
      } else {
        json choice = {{"index", 0}, {"finish_reason", last ? json("length") : json(nullptr)}};
        if (route == Route::kCompletions)
          choice["text"] = delta;
        else
          choice["delta"] = {{"content", delta}};
        e = {{"object", "text_completion"}, {"choices", json::array({choice})}};
        if (usage_every_chunk) e["usage"] = {{"prompt_tokens", 7}, {"completion_tokens", st.done}};
      }
      return e;
    };
    if (!stream) {
      while (s->done < s->n) next_chunk(*s);
      json e;
      if (route == Route::kGenerate) {
        e = event(*s, "", true);
      } else {
        json choice = {{"index", 0}, {"finish_reason", "length"}};
        if (route == Route::kCompletions)
          choice["text"] = s->text;
        else
          choice["message"] = {{"role", "assistant"}, {"content", s->text}};
        e = {{"choices", json::array({choice})},
             {"usage", {{"prompt_tokens", 7}, {"completion_tokens", s->n}}}};
      }
      --in_flight;
      res.set_content(e.dump(), "application/json");
      return;
    }
    res.set_chunked_content_provider("text/event-stream", [this, s, route, event](
                                                              size_t, httplib::DataSink& sink) {
      std::string out;
      if (s->done < s->n) {
        if (route == Route::kChat && !s->role_sent) {
          // OpenAI's chat stream opens at once with a role-only delta: no text, so it must not
          // count as the first token.
          s->role_sent = true;
          out = "data: " +
                json{{"choices", json::array({{{"index", 0}, {"delta", {{"role", "assistant"}}}}})}}
                    .dump() +
                "\n\n";
          sink.write(out.data(), out.size());
          return true;
        }
        const size_t before = s->text.size();
        next_chunk(*s);
        out += "data: " + event(*s, s->text.substr(before), s->done == s->n).dump() + "\n\n";
        sink.write(out.data(), out.size());
        return true;
      }
      if (route != Route::kGenerate && !usage_every_chunk) {
        // include_usage: a last chunk with no choices and the totals.
        out += "data: " +
               json{{"choices", json::array()},
                    {"usage", {{"prompt_tokens", 7}, {"completion_tokens", s->n}}}}
                   .dump() +
               "\n\n";
      }
      out += "data: [DONE]\n\n";
      --in_flight;
      sink.write(out.data(), out.size());
      sink.done();
      return true;
    });
  }

  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
  socket_t listen_fd_ = -1;
};

}  // namespace tandem::bench::testing

// A test fixture: the server's routes over the real default model (no MTP, 16k KV tokens), built
// once per suite (default flags, or set_up's). Route tests dispatch requests to router_ and read
// state_.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backends/init.h"
#include "chat_template/chat_template.h"
#include "model/model.h"
#include "server/routes.h"

namespace tandem::server {

inline std::string source_path(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/" + rel;
}

class DefaultModelRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { set_up(ServerArgs{}); }
  // A suite with other launch flags (--tool-call-parser, ...) defines its own SetUpTestSuite
  // calling this.
  static void set_up(ServerArgs a) {
    init_backends();
    a.model_path = source_path("models/tandem-austen");
    state_ = new ServerState(a);
    LoadedModel lm;
    lm.tokenizer = Tokenizer::from_file(a.model_path + "/tokenizer.json");
    auto tpl = load_chat_template(a.model_path);
    ASSERT_TRUE(tpl.has_value());
    lm.chat_template.emplace(tpl->source);
    LoadOptions lo;
    lo.load_mtp = false;
    lo.show_progress = false;
    EngineOptions eo;
    eo.max_total_tokens = 16384;
    lm.engine =
        std::make_unique<Engine>(std::shared_ptr<const Model>(Model::load(a.model_path, lo)), eo);
    state_->set_model(std::move(lm));
    router_ = new Router();
    add_openai_routes(*router_, *state_);
    add_native_routes(*router_, *state_);
  }
  static void TearDownTestSuite() {
    delete router_;
    delete state_;
    router_ = nullptr;
    state_ = nullptr;
  }
  static inline ServerState* state_ = nullptr;
  static inline Router* router_ = nullptr;
};

}  // namespace tandem::server

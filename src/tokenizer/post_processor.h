// Post-processors (tokenizer.json "post_processor"): what encode(add_special_tokens=true) adds
// around the ids, e.g. Llama-3's <|begin_of_text|>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tandem::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Called only when special tokens are requested; `ids` is the encoded single sequence.
  virtual std::vector<int32_t> process(std::vector<int32_t> ids) const = 0;
};

// nullptr for null or for processors that never change ids (ByteLevel only trims offsets).
// Supports TemplateProcessing, ByteLevel, Sequence, BertProcessing and RobertaProcessing.
std::unique_ptr<PostProcessor> parse_post_processor(const Json& j, const std::string& path);

}  // namespace tandem::tok

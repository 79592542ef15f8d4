// Writes a quantized copy of a high-precision checkpoint in the layout the real quantized
// checkpoints have (tandem make-checkpoint --from DIR --quant fp8|mxfp4): the linear weights the
// format's rules quantize (fp8_checkpoint_quant / mxfp4_checkpoint_quant, resolved per tensor by
// quant_scheme) become e4m3 + weight_scale_inv or packed e2m1 + e8m0 weight_scale; every other
// tensor is copied as stored; config.json gains the quantization_config; tokenizer and other
// side files are copied.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

void quantize_checkpoint(const std::string& src_dir, const std::string& dst_dir,
                         const std::string& quant, uint64_t max_shard_bytes = 2ull << 30);

}  // namespace tandem

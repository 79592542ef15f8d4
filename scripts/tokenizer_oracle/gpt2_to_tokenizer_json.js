// Builds GPT-2's tokenizer.json from the original encoder.json + vocab.bpe, the same way Hugging
// Face's GPT-2 tokenizer.json is laid out: ByteLevel pre-tokenizer (no prefix space), BPE with
// "a b" merges, ByteLevel post-processor and decoder, <|endoftext|> as an added special token.
// usage: node gpt2_to_tokenizer_json.js encoder.json vocab.bpe out/tokenizer.json
'use strict';
const fs = require('fs');

function main([encoderPath, bpePath, outPath]) {
  if (!outPath) throw new Error('usage: gpt2_to_tokenizer_json.js encoder.json vocab.bpe out.json');
  const vocab = JSON.parse(fs.readFileSync(encoderPath, 'utf8'));
  const merges = fs
    .readFileSync(bpePath, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0 && !line.startsWith('#version'));
  const eot = '<|endoftext|>';
  if (vocab[eot] === undefined) throw new Error(`${encoderPath} has no ${eot}`);
  const byteLevel = (addPrefixSpace, trimOffsets) => ({
    type: 'ByteLevel',
    add_prefix_space: addPrefixSpace,
    trim_offsets: trimOffsets,
    use_regex: true,
  });
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      {
        id: vocab[eot],
        content: eot,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: true,
        special: true,
      },
    ],
    normalizer: null,
    pre_tokenizer: byteLevel(false, true),
    post_processor: byteLevel(true, false),
    decoder: byteLevel(true, true),
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges,
    },
  };
  fs.writeFileSync(outPath, JSON.stringify(tokenizer));
  console.log(`wrote ${outPath}: ${Object.keys(vocab).length} tokens, ${merges.length} merges`);
}

main(process.argv.slice(2));

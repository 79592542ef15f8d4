// Derives extra tokenizer.json files from the real ones, so that the parts of the format the
// real files do not use are also checked against Hugging Face: TemplateProcessing (Meta's own
// Llama-3 post-processor, a GLM-style two-token prefix), other normalizers, every Split behavior,
// Digits, WhitespaceSplit, and added tokens with lstrip/rstrip/single_word/normalized.
// usage: node make_variants.js DEST   (reads DEST/{gpt2,llama3,qwen3}/tokenizer.json)
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const byteLevel = (addPrefixSpace, useRegex) => ({
  type: 'ByteLevel',
  add_prefix_space: addPrefixSpace,
  trim_offsets: false,
  use_regex: useRegex,
});
const special = (name) => ({ SpecialToken: { id: name, type_id: 0 } });
const seqA = { Sequence: { id: 'A', type_id: 0 } };
const seqB = { Sequence: { id: 'B', type_id: 1 } };
const addedToken = (content, id, opts) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: false,
  ...opts,
});

// The next free id the way HF assigns one (model vocab size, then past the largest added id).
function nextId(tok) {
  let max = Object.keys(tok.model.vocab).length - 1;
  for (const t of tok.added_tokens) max = Math.max(max, t.id);
  return max + 1;
}

function templateProcessor(prefix) {
  const specials = {};
  for (const [name, id] of prefix) specials[name] = { id: name, ids: [id], tokens: [name] };
  return {
    type: 'TemplateProcessing',
    single: [...prefix.map(([name]) => special(name)), seqA],
    pair: [...prefix.map(([name]) => special(name)), seqA, ...prefix.map(([name]) => special(name)), seqB],
    special_tokens: specials,
  };
}

// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the others take
// U+0100 onwards in byte order.
function byteToUnicode() {
  const table = [];
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    table.push(String.fromCodePoint(printable ? b : next++));
  }
  return table;
}

// The byte-level tokenizer that Tandem's make_byte_level_tokenizer_json() describes, written
// independently from that description; tests/tokenizer checks the C++ output equals this file.
const BYTE_LEVEL_SPECIALS = ['<|endoftext|>', '[gMASK]', '<sop>', '<|user|>', '<|assistant|>'];
function byteLevelTokenizer() {
  const vocab = {};
  byteToUnicode().forEach((ch, b) => (vocab[ch] = b));
  const level = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: BYTE_LEVEL_SPECIALS.map((content, i) =>
      addedToken(content, 256 + i, { special: true }),
    ),
    normalizer: null,
    pre_tokenizer: level,
    post_processor: level,
    decoder: level,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

const variants = {
  byte_level: byteLevelTokenizer,
  // Meta's Llama-3 tokenizer.json adds <|begin_of_text|> this way (the npm copy has only ByteLevel).
  llama3_bos(base) {
    const t = base('llama3');
    t.post_processor = {
      type: 'Sequence',
      processors: [byteLevel(true, true), templateProcessor([['<|begin_of_text|>', 128000]])],
    };
    return t;
  },
  // GLM-4 style: two special tokens in front of every sequence, added on top of Qwen3.
  qwen3_glm_template(base) {
    const t = base('qwen3');
    const gmask = nextId(t);
    t.added_tokens.push(addedToken('[gMASK]', gmask, { special: true }));
    t.added_tokens.push(addedToken('<sop>', gmask + 1, { special: true }));
    t.post_processor = {
      type: 'Sequence',
      processors: [byteLevel(false, false), templateProcessor([['[gMASK]', gmask], ['<sop>', gmask + 1]])],
    };
    return t;
  },
  // Normalizers and Split behaviors in front of GPT-2's byte-level BPE.
  gpt2_splits(base) {
    const t = base('gpt2');
    t.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' }] };
    t.pre_tokenizer = {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { String: '--' }, behavior: 'Removed', invert: false },
        { type: 'Split', pattern: { Regex: '[,;]' }, behavior: 'MergedWithPrevious', invert: false },
        { type: 'Split', pattern: { Regex: '[(\\[{]' }, behavior: 'MergedWithNext', invert: false },
        { type: 'Digits', individual_digits: true },
        byteLevel(true, true),
      ],
    };
    return t;
  },
  gpt2_contiguous(base) {
    const t = base('gpt2');
    t.normalizer = {
      type: 'Sequence',
      normalizers: [
        { type: 'NFD' },
        { type: 'Replace', pattern: { Regex: 'o{2,}|ee' }, content: '0' },
        { type: 'Replace', pattern: { String: '``' }, content: '"' },
        { type: 'Prepend', prepend: '>' },
      ],
    };
    t.pre_tokenizer = {
      type: 'Sequence',
      pretokenizers: [
        // Matches only empty strings: exercises find_iter's empty-match rules.
        { type: 'Split', pattern: { Regex: '(?=\\p{Lu})' }, behavior: 'Isolated', invert: false },
        { type: 'Split', pattern: { Regex: '\\p{Lu}' }, behavior: 'Contiguous', invert: false },
        { type: 'Split', pattern: { Regex: '[^\\d]+' }, behavior: 'Isolated', invert: true },
        { type: 'Split', pattern: { Regex: '\\p{P}' }, behavior: 'MergedWithPrevious', invert: true },
        { type: 'Digits', individual_digits: false },
        { type: 'WhitespaceSplit' },
        byteLevel(false, false),
      ],
    };
    return t;
  },
  // Added tokens with every option, under a Lowercase normalizer (so normalized matters).
  gpt2_added(base) {
    const t = base('gpt2');
    t.normalizer = { type: 'Lowercase' };
    let id = nextId(t);
    const vocab = t.model.vocab;
    t.added_tokens.push(addedToken('<mask>', id++, { lstrip: true, special: true }));
    t.added_tokens.push(addedToken('[R]', id++, { rstrip: true }));
    t.added_tokens.push(addedToken('[R][R]', id++, {}));
    t.added_tokens.push(addedToken('hello', vocab['hello'], { single_word: true, normalized: true }));
    t.added_tokens.push(addedToken('ÉCOLE', id++, { normalized: true }));
    t.added_tokens.push(
      addedToken('<both>', id++, { lstrip: true, rstrip: true, single_word: true, special: true }),
    );
    return t;
  },
};

function main([dest]) {
  if (!dest) throw new Error('usage: make_variants.js DEST');
  const cache = {};
  const base = (name) => {
    cache[name] ??= fs.readFileSync(path.join(dest, name, 'tokenizer.json'), 'utf8');
    return JSON.parse(cache[name]);
  };
  for (const [name, make] of Object.entries(variants)) {
    const t = make(base);
    const dir = path.join(dest, name);
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'tokenizer.json');
    fs.writeFileSync(file, JSON.stringify(t));
    // HF re-derives added-token ids on load; the file must agree with it to be a fair fixture.
    const hf = Tokenizer.fromFile(file);
    for (const a of t.added_tokens) {
      const got = hf.tokenToId(a.content);
      if (got !== a.id) throw new Error(`${name}: '${a.content}' has id ${a.id}, HF gives ${got}`);
    }
    console.log(`wrote ${file}`);
  }
}

main(process.argv.slice(2));

// Encodes the corpus with Hugging Face tokenizers (the Node binding) and writes what Tandem's
// tokenizer must reproduce: DEST/expected_NAME.json per tokenizer, plus DEST/manifest.json.
// usage: node oracle.js DEST NAME...   (reads DEST/NAME/tokenizer.json)
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');
const corpus = require('./corpus');

const ORACLE = 'tokenizers@' + require('tokenizers/package.json').version;

async function expectedFor(dest, name) {
  const file = path.join(dest, name, 'tokenizer.json');
  const tok = Tokenizer.fromFile(file);
  const cases = [];
  for (const { name: caseName, text } of corpus) {
    for (const addSpecialTokens of [false, true]) {
      const enc = await tok.encode(text, null, { addSpecialTokens });
      const ids = Array.from(enc.getIds());
      cases.push({
        name: caseName,
        add_special_tokens: addSpecialTokens,
        text,
        ids,
        decoded: await tok.decode(ids, false),
        decoded_skip_special: await tok.decode(ids, true),
      });
    }
  }
  return {
    tokenizer: name,
    tokenizer_file: path.join(name, 'tokenizer.json'),
    oracle: ORACLE,
    vocab_size: tok.getVocabSize(true),
    cases,
  };
}

async function main([dest, ...names]) {
  if (!dest || names.length === 0) throw new Error('usage: oracle.js DEST NAME...');
  for (const name of names) {
    const expected = await expectedFor(dest, name);
    const out = path.join(dest, `expected_${name}.json`);
    fs.writeFileSync(out, JSON.stringify(expected));
    console.log(`wrote ${out}: ${expected.cases.length} cases (${ORACLE})`);
  }
  const manifest = { oracle: ORACLE, corpus_size: corpus.length, tokenizers: names };
  fs.writeFileSync(path.join(dest, 'manifest.json'), JSON.stringify(manifest, null, 2));
}

main(process.argv.slice(2)).catch((e) => {
  console.error(e);
  process.exit(1);
});

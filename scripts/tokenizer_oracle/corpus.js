// The texts every tokenizer is checked on. Each one targets something that tokenizers get
// wrong: regex classes (\p{L}, \p{N}, (?i:...), (?!\S)), whitespace runs, Unicode normalization,
// multi-code-point emoji, scripts without spaces, added tokens inside text, and long inputs.
'use strict';

// A deterministic pseudo-random line of exactly `length` code points mixing everything below.
function longLine(length, seed) {
  const parts = [
    'the', ' quick', ' brown', ' fox', ',', '.', ' 12345', ' 3.14', '  ', '\t', ' DON\'T', " it's",
    ' 你好世界', ' こんにちは', ' مرحبا', ' नमस्ते', ' 👩‍💻', ' 👍🏽', ' 🇯🇵', ' café', ' e\u0301',
    ' <|endoftext|>', ' x=y+z;', ' (a[0]){', ' ...', ' ___', ' Ünïcödé', ' 한국어', '!!!', ' ',
  ];
  let state = seed >>> 0;
  const out = [];
  let count = 0;
  while (count < length) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    const cps = Array.from(parts[state % parts.length]);
    for (const cp of cps) {
      if (count === length) break;
      out.push(cp);
      count++;
    }
  }
  return out.join('');
}

// Deterministic random strings over many Unicode blocks, including characters assigned in
// Unicode 10-17 (where the system libraries' Unicode versions differ from HF's).
function randomUnicode(count, seed) {
  const ranges = [
    [0x09, 0x0d], [0x20, 0x7e], [0x80, 0x24f], [0x300, 0x36f], [0x370, 0x4ff], [0x560, 0x560],
    [0x590, 0x6ff], [0x7fd, 0x8ff], [0x900, 0x97f], [0xcf3, 0xcf3], [0xe00, 0xe7f],
    [0x1100, 0x11ff], [0x1680, 0x1680], [0x180e, 0x180e], [0x1c89, 0x1c8a], [0x1df6, 0x1dff],
    [0x2000, 0x206f], [0x20a0, 0x20cf], [0x2100, 0x214f], [0x2460, 0x24ff], [0x3000, 0x30ff],
    [0x32ff, 0x32ff], [0x4e00, 0x9fff], [0xa7c0, 0xa7dc], [0xac00, 0xd7a3], [0xfe00, 0xfe0f],
    [0xff00, 0xffef], [0x10570, 0x105bc], [0x10781, 0x107ba], [0x10d40, 0x10d8f],
    [0x11f00, 0x11f5a], [0x16d40, 0x16d79], [0x1d400, 0x1d7ff], [0x1e030, 0x1e08f],
    [0x1f300, 0x1faff], [0x1fbf0, 0x1fbf9], [0x1cc00, 0x1ccf9], [0x20000, 0x2000f],
    [0x2ebf0, 0x2ebff], [0x31350, 0x3135f], [0xe0000, 0xe007f],
  ];
  let state = seed >>> 0;
  const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
  const out = [];
  for (let i = 0; i < count; i++) {
    let text = '';
    for (let n = next() % 50; n > 0; n--) {
      const [lo, hi] = ranges[next() % ranges.length];
      text += String.fromCodePoint(lo + (next() % (hi - lo + 1)));
      if (next() % 4 === 0) text += ' ';
      if (next() % 9 === 0) text += "'S";
    }
    out.push([`random_${String(i).padStart(3, '0')}`, text]);
  }
  return out;
}

const cases = [
  ['empty', ''],
  ['english', 'The quick brown fox jumps over the lazy dog. It\'s 5 o\'clock; isn\'t it? Yes!'],
  ['contractions_case', "I'M SURE YOU'RE RIGHT, DON'T YOU THINK? We'Ve, they'LL, she'D, it'S, I'm."],
  ['latin_accents', 'Café naïve résumé — “quotes” ‘single’ … ¿Qué? ¡Sí! Straße Ærøskøbing Œuvre'],
  ['emoji', 'I ❤️ 🍕! 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵🇺🇸 😀😃😄 🫠 ✌🏿 🧑🏻‍🤝‍🧑🏾'],
  ['cjk', '你好，世界！这是一个测试。日本語のテキストとカタカナ、ひらがな。한국어 텍스트입니다.'],
  ['arabic', 'مرحبا بالعالم! هذا اختبار للنص العربي ١٢٣٤٥ والأرقام 2024.'],
  ['hindi', 'नमस्ते दुनिया! यह एक परीक्षण है। १२३ क्षत्रिय'],
  ['code_python', 'def f(x):\n\tif x > 0:\n\t\treturn x ** 2\n    else:\n  \t  return -x  # mixed\n\n\n'],
  [
    'code_js',
    'function add(a, b) {\n  return a + b; // sum\n}\nconst arr = [1, 2, 3].map((x) => x * 2);\n',
  ],
  ['newlines', 'a\n\n\nb\n\nc\nd'],
  ['spaces_only', '   '],
  ['trailing_spaces', 'trailing spaces   '],
  ['leading_spaces', '   leading spaces'],
  ['crlf', '\r\nline1\r\nline2\r\n\r\n'],
  ['tabs', '\t\t\tx\t \ty'],
  ['space_runs', 'multiple    spaces  between\n   \n \n words \u00a0nbsp\u3000ideo\u2003em'],
  ['digits', '1234567890123456789012345 3.14159 1,000,000 ٣٤٥ ²³ ⅷ 0x1F 1e-10'],
  ['url_email', 'https://example.com/path?q=1&r=2#frag user.name+tag@example.org'],
  ['json', '{"key": [1, 2, {"nested": null}], "s": "str\\n", "u": "\\u00e9"}'],
  [
    'special_tokens',
    '<|endoftext|><|im_start|>user\nHi<|im_end|>\n<|begin_of_text|><|start_header_id|>system' +
      '<|end_header_id|>\n\n<|eot_id|> <｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>' +
      '<think>x</think> <|EOT|><｜tool▁calls▁begin｜><｜tool▁sep｜>',
  ],
  ['special_adjacent', 'Hello<|endoftext|>world  <|im_start|> spaced <|im_end|> <|endoftext'],
  ['nfc_nfd', 'e\u0301 vs \u00e9; A\u030a vs \u00c5; \u1e9b\u0323 \u0071\u0307\u0323 Ǆ ﬁ ①'],
  ['combining', 'a\u0300\u0301\u0302 \u0915\u094d\u0937 \u05e9\u05c1\u05b8 Z̤͔ͧ̑̓ä͖̭̈̇'],
  // U+180E is a space to PCRE2 but not to Oniguruma; ſ and K (Kelvin) case-fold to s and k.
  [
    'onig_edges',
    'a\u180eb a \u180e\u180e b \u180e \u017f\u212a I\u017fT \u2028 x\u0085y \u200bzero-width\ufeff \u000b\u000c',
  ],
  // Whole words that are Llama-3 vocab entries but that its merges would split (ignore_merges).
  ['ignore_merges_words', 'Còn việc hợp nhiều điều jeho Việt ایران ngoài nhiên biệt lardan'],
  ['case_forms', 'ΟΔΟΣ İstanbul ǅemal ß ẞ ÉCOLE École'],
  [
    'punctuation',
    "Mixed: --> <== !== ??? ... ___ ;; -- (x) [y] {z} «guillemets» ‹› ``tex quotes'' CamelCaseWord",
  ],
  [
    'added_token_options',
    'say hello, hellothere xhello hello_ Hello hello\u0301 <mask>  <mask>\t<mask>x[R]   next ' +
      '[R][R] [R][R][R] <both>  A<both>B  <both> ÉCOLE école',
  ],
  ['long_word', 'a'.repeat(3000) + ' ' + 'ab'.repeat(1500)],
  ['long_whitespace', ' '.repeat(5000) + 'x' + '\n'.repeat(2000) + 'y' + '\t '.repeat(1000)],
  ['long_digits', '9'.repeat(4000)],
  ['line_20k', longLine(20000, 42)],
  // Characters newer than some of the Unicode tables involved: emoji 15-16 (pink heart, shaking
  // face, phoenix), CJK Extension H and I, Kawi, Garay, segmented digits, modifier letters.
  [
    'unicode_new',
    'I \u{1FA77} you \u{1FAE8}\u{1F426}\u200D\u{1F525} \u{31350}\u{31351} \u{2EBF0} ' +
      '\u{11F04}\u{11F51} \u{10D50}\u{10D70} \u{1FBF1}\u{1FBF2} \u32FF \u{1E030} \u1C89',
  ],
  ...randomUnicode(100, 2024),
];

module.exports = cases.map(([name, text]) => ({ name, text }));

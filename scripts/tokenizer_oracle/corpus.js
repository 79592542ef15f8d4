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
];

module.exports = cases.map(([name, text]) => ({ name, text }));

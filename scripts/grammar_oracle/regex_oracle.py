#!/usr/bin/env python3
"""Expected results for the regex front end's language tests, from Python's `re`.

Writes tests/data/grammar/regex_cases.json:
  {"fullmatch": [{"regex": R, "strings": [[S, MATCHES], ...]}, ...],
   "search_json": [{"pattern": P, "strings": [[S, JSON_TEXT, MATCHES], ...]}, ...]}
tests/grammar/regex_language_test.cpp checks regex_to_ebnf(R) against every fullmatch
expectation, and json_schema_language_test.cpp a {"type": "string", "pattern": P} schema against
the JSON text of every S (JSON Schema's pattern is a search, not a full match).

Python's reading is adjusted to the ECMAScript meanings Tandem implements
(docs/structured-outputs.md): re.ASCII for \\d and \\w, \\s spelled out as ECMAScript's
whitespace set, and $ as \\Z (Python's $ also matches before a final newline).

Usage: regex_oracle.py [--check]   (--check: fail if the committed file differs)
"""

import json
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "grammar", "regex_cases.json")

ECMA_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"


def to_python(regex, search):
    """Rewrites \\s, \\S (and, for search, $) into their ECMAScript meaning for Python re."""
    out, i, in_class = [], 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):
            e = regex[i + 1]
            if e == "s":
                out.append(ECMA_SPACE if in_class else "[" + ECMA_SPACE + "]")
            elif e == "S":
                if in_class:
                    raise ValueError("\\S inside a class: not expressible for the oracle")
                out.append("[^" + ECMA_SPACE + "]")
            else:
                out.append(regex[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < len(regex) and regex[i] == "^":
                out.append("^")
                i += 1
            continue
        elif c == "$" and search:
            out.append("\\Z")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


# (regex, strings to classify): hand-picked strings near the edges; random ones are added.
FULLMATCH = [
    ("abc", ["abc", "ab", "abcd", "", "ABC"]),
    ("a.c", ["abc", "a.c", "a\nc", "ac", "aéc", "a😀c"]),
    (r"a\.c", ["a.c", "abc"]),
    (r"\$\^\(\)\[\]\{\}\|\*\+\?\\\/\-", ["$^()[]{}|*+?\\/-", "$^()[]{}|*+?\\-"]),
    ("[abc]+", ["a", "cab", "", "abd"]),
    ("[a-z0-9_]*", ["", "a_9", "A", "é"]),
    ("[^a-z]+", ["ABC", "a", "1-2", "\n", "é😀"]),
    (r"[\d\s]+", ["1 2", "\t9", "a", " ", "\u00a0", "\u3000", "٣"]),
    (r"[^\d]", ["a", "1", "é", "\n"]),
    (r"[a\-z]", ["a", "-", "z", "b"]),
    ("[-a]", ["-", "a", "b"]),
    ("[a-]", ["-", "a", "b"]),
    (r"[\]\[]+", ["[]", "][", "a"]),
    ("[.]", [".", "a"]),
    ("[*+?{}()|$^]+", ["*+?", "{}()|$^", "a"]),
    (r"[\w.-]+@[\w-]+\.[a-z]{2,}", ["a.b@c-d.io", "x@y.c", "é@x.io", "a@b.com"]),
    (r"\d+", ["0", "123", "", "12a", "٣"]),
    (r"\D", ["a", "1", " "]),
    (r"\w{3}", ["a_1", "ab", "abcd", "é_1", "a-1"]),
    (r"\W", ["-", "a", "_", "é"]),
    (r"\s", [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\u00a0", "\u2028", "a", "\u200b"]),
    (r"\S+", ["abc", "a b", "é", "\u00a0"]),
    ("a*", ["", "a", "aaaa", "b", "aab"]),
    ("a+", ["", "a", "aaa", "ab"]),
    ("a?", ["", "a", "aa"]),
    ("a{3}", ["aa", "aaa", "aaaa"]),
    ("a{2,}", ["a", "aa", "aaaaaa"]),
    ("a{2,4}", ["a", "aa", "aaaa", "aaaaa"]),
    ("a{0,2}b", ["b", "ab", "aab", "aaab"]),
    ("(ab){2}", ["abab", "ab", "ababab", "aabb"]),
    ("(a|bc){1,3}", ["a", "bc", "abca", "abcabc", "", "b"]),
    ("a*?b", ["b", "aab", "a"]),
    ("a{2,3}?c", ["aac", "aaac", "ac"]),
    ("a??b", ["b", "ab", "aab"]),
    ("(?:ab|cd)+", ["ab", "abcd", "cdab", "", "ac"]),
    (r"(?P<year>\d{4})-(?P<month>\d{2})", ["2024-01", "24-01", "2024-1"]),
    ("cat|dog|bird", ["cat", "dog", "bird", "catdog", ""]),
    ("a|", ["a", "", "b"]),
    ("|a", ["a", "", "aa"]),
    ("(a|)b", ["ab", "b", "aab"]),
    ("a|b|c|", ["a", "b", "c", "", "d"]),
    ("^abc$", ["abc", "abcd", "abc\n"]),
    ("^a|b$", ["a", "b", "ab", ""]),
    ("(^a)", ["a", ""]),
    ("^(a|b)$", ["a", "b", "ab"]),
    ("^$", ["", "a"]),
    ("(^a|^b)c", ["ac", "bc", "c"]),
    ("(a$|b$)", ["a", "b"]),
    ("^(^a)?b", ["ab", "b", "a"]),
    (r"\x41\x42", ["AB", "ab"]),
    (r"\u00e9+", ["é", "éé", "e"]),
    (r"\t\n", ["\t\n", "tn"]),
    (r"[\x00-\x1f]+", ["\x00", "\x1f\x01", " "]),
    (r"\0a", ["\x00a", "0a"]),
    (r"\U0001F600", ["😀", "😁"]),
    (r"\v\f\a", ["\x0b\x0c\x07"]),
    (r"[\b]", ["\x08", "b"]),
    ("é+", ["é", "ééé", "e"]),
    ("[à-ü]+", ["àü", "é", "a", "ÿ"]),
    ("[^a]", ["b", "a", "é", "😀", "\n"]),
    (".", ["a", "\n", "é", "😀", "", "ab", "\r"]),
    (".+", ["abc", "a\nb", "\r"]),
    ("😀+", ["😀", "😀😀", "😁"]),
    ("[😀-🙏]{2}", ["😀🙏", "😀", "😀a"]),
    ("[^😀]", ["😁", "😀", "a"]),
    ("a{", ["a{", "a"]),
    ("a{x}", ["a{x}", "a"]),
    ("a{1,x}", ["a{1,x}", "a"]),
    ("x{ 2}", ["x{ 2}", "xx"]),
    ("a}", ["a}"]),
    ("]", ["]"]),
    ("(a+)+b", ["ab", "aaab", "b", "aaa"]),
    ("(a*)*", ["", "aaa", "b"]),
    ("((ab)?c)*", ["", "c", "abc", "abcc", "ab"]),
    ("(?#a comment)ab", ["ab", "(?#a comment)ab"]),
    (r"\(\d{3}\) \d{3}-\d{4}", ["(555) 123-4567", "555-123-4567", "(555) 1234567"]),
    (r"\d{4}-\d{2}-\d{2}", ["2024-02-30", "2024-2-3"]),
    (r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}",
     ["192.168.0.1", "255.255.255.255", "256.1.1.1", "1.2.3", "01.2.3.4"]),
    ("#[0-9a-fA-F]{6}", ["#a0B1c2", "#a0B1c", "#g0B1c2"]),
    (r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", ["1.2.3", "1.2.3-rc.1", "1.2", "1.2.3-"]),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
     ["123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400"]),
    (r"[A-Z][a-z]+( [A-Z][a-z]+)*", ["John Smith", "John", "john", "John  Smith"]),
    (r"(true|false|null|-?\d+)", ["true", "-12", "nul", "- 1"]),
    (r'"[^"\\]*"', ['"abc"', '"a\\"', '"a"b"']),
    (r"[\d\D]", ["a", "\n", " "]),
    (r"\w+\s*=\s*\d+", ["x = 1", "x=1", "x =", "é=1"]),
]

PATTERNS = [
    ("^[a-z]+$", ["abc", "", "ab1", "ABC"]),
    ("[0-9]", ["abc1", "abc", "1", ""]),
    ("^abc", ["abcdef", "xabc", "abc"]),
    ("xyz$", ["abcxyz", "xyzabc", "xyz\n"]),
    ("^a|b$", ["ax", "xb", "xax", "bx"]),
    ('^"', ['"quoted', 'not"']),
    (r"\\", ["a\\b", "ab"]),
    ("^\n$", ["\n", "n", "\\n"]),
    ("a.b", ["a\nb", "a\"b", "a\\b", "a\tb", "ab", "xa\x01bx"]),
    (r"^[^\x00-\x1f]*$", ["abc", "a\nb", "\x7f", "é"]),
    (r"^[\x00-\x08]+$", ["\x00\x08", "\x01", "\t"]),
    (r"^\S+@\S+\.\S+$", ["a@b.c", "a b@c.d", "a@b"]),
    (r"^\d{3}-\d{4}$", ["555-1234", "5555-1234", "555-12345"]),
    (r"^(\([0-9]{3}\))?[0-9]{3}-[0-9]{4}$", ["(888)555-1212", "555-1212", "(888)555-1212 ext. 532"]),
    ("", ["", "anything"]),
    ("^$", ["", "x"]),
    ("é", ["café", "cafe"]),
]

EXTRA_ALPHABET = ["a", "b", "0", "1", " ", "\n", "é", "😀", "_", "-", '"', "\\", "\x01"]


def alphabet(regex, strings):
    chars = set(EXTRA_ALPHABET)
    for s in strings:
        chars.update(s)
    chars.update(c for c in regex if c not in "\\[](){}|*+?^$.")
    return sorted(chars)


def sample(rng, tree, pool):
    """A string the parsed regex probably matches (Python decides whether it does)."""
    from re import _constants as c  # the parse tree's opcodes (Python 3.11+)
    out = []
    for op, av in tree:
        if op == c.LITERAL:
            out.append(chr(av))
        elif op in (c.ANY, c.NOT_LITERAL):
            out.append(rng.choice(pool))
        elif op == c.IN:
            items = [x for x in av if x[0] in (c.LITERAL, c.RANGE)]
            if items and av[0][0] != c.NEGATE and rng.random() < 0.8:
                kind, v = rng.choice(items)
                out.append(chr(v) if kind == c.LITERAL else chr(rng.randint(v[0], v[1])))
            else:
                out.append(rng.choice(pool + ["7", "x", "_", " ", "\t"]))
        elif op == c.BRANCH:
            out.append(sample(rng, rng.choice(av[1]), pool))
        elif op == c.SUBPATTERN:
            out.append(sample(rng, av[-1], pool))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            lo, hi, sub = av
            n = rng.randint(lo, min(hi, lo + 3))
            out.extend(sample(rng, sub, pool) for _ in range(n))
    return "".join(out)


def variants(rng, regex, strings, count):
    """The hand-picked strings, strings generated from the regex, one-character edits of them
    and random strings."""
    from re import _parser
    out = list(strings)
    chars = alphabet(regex, strings)
    tree = _parser.parse(to_python(regex, False), re.ASCII)
    generated = [sample(rng, tree, chars) for _ in range(count // 2)]
    out += generated
    strings = list(strings) + generated[:4]
    for s in strings:
        for _ in range(3):
            if not s:
                break
            i = rng.randrange(len(s))
            kind = rng.randrange(3)
            if kind == 0:
                out.append(s[:i] + s[i + 1:])
            elif kind == 1:
                out.append(s[:i] + rng.choice(chars) + s[i:])
            else:
                out.append(s[:i] + rng.choice(chars) + s[i + 1:])
    for _ in range(count):
        out.append("".join(rng.choice(chars) for _ in range(rng.randrange(9))))
    seen, unique = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def build():
    rng = random.Random(20260101)
    data = {"fullmatch": [], "search_json": []}
    for regex, strings in FULLMATCH:
        rx = re.compile(to_python(regex, False), re.ASCII)
        cases = [[s, rx.fullmatch(s) is not None] for s in variants(rng, regex, strings, 25)]
        data["fullmatch"].append({"regex": regex, "strings": cases})
    for pattern, strings in PATTERNS:
        rx = re.compile(to_python(pattern, True), re.ASCII)
        cases = [[s, json.dumps(s, ensure_ascii=False), rx.search(s) is not None]
                 for s in variants(rng, pattern, strings, 15)]
        data["search_json"].append({"pattern": pattern, "strings": cases})
    return data


def main():
    data = build()
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if "--check" in sys.argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit("regex_cases.json is out of date: run scripts/grammar_oracle/regex_oracle.py")
        print("regex_cases.json is up to date")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    n = sum(len(c["strings"]) for c in data["fullmatch"])
    m = sum(len(c["strings"]) for c in data["search_json"])
    print(f"wrote {OUT}: {len(data['fullmatch'])} regexes / {n} strings, "
          f"{len(data['search_json'])} patterns / {m} strings")


if __name__ == "__main__":
    main()

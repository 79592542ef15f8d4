// EBNF grammars shared by the grammar tests (and mirrored in bench/grammar/grammar_bench.cpp).
#pragma once

namespace tandem::grammar::testing {

// RFC 8259 JSON, whitespace unbounded.
inline constexpr const char* kJson = R"G(
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
)G";

// Arithmetic with precedence, written right-recursively.
inline constexpr const char* kArith = R"G(
root   ::= expr
expr   ::= term ( ws [-+] ws term )*
term   ::= factor ( ws [*/] ws factor )*
factor ::= number | "(" ws expr ws ")" | "-" factor
number ::= [0-9]+ ( "." [0-9]+ )?
ws     ::= " "?
)G";

// Nested brackets of three kinds, balanced.
inline constexpr const char* kBrackets = R"G(
root ::= item*
item ::= "(" root ")" | "[" root "]" | "{" root "}" | [a-c]
)G";

// Bounded repeats.
inline constexpr const char* kRepeats = R"G(
root ::= "x" [0-9]{2,4} "-" ab{3} ("." [a-z]{0,3})? tail{1,}
ab   ::= "a" | "b"
tail ::= "!"
)G";

// Alternatives that share long prefixes, and rules that can end where others go on.
inline constexpr const char* kSharedPrefixes = R"G(
root ::= ("foo" | "foobar" | "foobaz" | "fo" [o-q]+ | word) (" " root)?
word ::= "f" [a-z]* "!"?
)G";

// Unicode: 2-, 3- and 4-byte classes, negation, literals with multi-byte characters.
inline constexpr const char* kUnicode = R"G(
root ::= (greek | cjk | emoji | notascii | "é" | "→x")+
greek ::= [α-ω]
cjk ::= [\u4e00-\u9fff]
emoji ::= [\U0001F600-\U0001F64F]
notascii ::= "<" [^\x00-\x7f] ">"
)G";

// Nullable rules everywhere: optional calls, nullable repeat bodies, rules that end where the
// caller goes on with the same bytes.
inline constexpr const char* kNullable = R"G(
root ::= a b c "."?
a    ::= "x"?
b    ::= a a | "y" b?
c    ::= (a "z")* d?
d    ::= e{2,3}
e    ::= "w" | ""
)G";

// Recursion that is not in tail position, with nullable recursive calls.
inline constexpr const char* kNested = R"G(
root ::= "(" root? ")" root? | "<" list ">"
list ::= (item ("," item)*)?
item ::= [0-9]+ | root
)G";

// Ambiguous and recursive: "[[[" splits between the two roots in exponentially many ways,
// which only a merged (graph-structured) stack keeps small.
inline constexpr const char* kAmbiguous = R"G(
root ::= item*
item ::= "[" root root "]" | [a-c] | "(" root ")"
)G";

// Quantifiers on quantifiers, which the automaton folds into one where the language allows
// (the Earley oracle reads them as written).
inline constexpr const char* kStacked = R"G(
root ::= ("ab"+)+ "," (c*)+ "," (c?)* "," ("d"+)? "," ("e"?)? "," ("f"{2,}){2,} "," (g+){0,2} "," (("h"?)+)+ ";" (("i"{2,})*)? ("j"{2,}){0,} "." ("k"+){2,3}
c    ::= "c" | "C"
g    ::= "g"
)G";

struct NamedGrammar {
  const char* name;
  const char* ebnf;
};
inline constexpr NamedGrammar kAll[] = {
    {"json", kJson},         {"arith", kArith},           {"brackets", kBrackets},
    {"repeats", kRepeats},   {"shared", kSharedPrefixes}, {"unicode", kUnicode},
    {"nullable", kNullable}, {"nested", kNested},         {"ambiguous", kAmbiguous},
    {"stacked", kStacked},
};

}  // namespace tandem::grammar::testing

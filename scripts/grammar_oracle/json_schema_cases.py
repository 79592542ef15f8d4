#!/usr/bin/env python3
"""Hand-written language cases for the JSON Schema front end.

Writes tests/data/grammar/json_schema_cases.json, a list of
  {"name", "schema" (or "json_object": true), "options": {"max_whitespace", "strict"},
   "valid": [TEXT...], "invalid": [TEXT...], "policy_rejected": [TEXT...]}
tests/grammar/json_schema_language_test.cpp checks json_schema_to_ebnf(schema) against every
text: "valid" ones must be accepted; "invalid" ones (not valid JSON, or not valid against the
schema) and "policy_rejected" ones (valid JSON Schema instances the grammar leaves out by
design: properties out of schema order, extra properties when additionalProperties is absent,
1.0 for an integer, exponents in a bounded number, ...; docs/structured-outputs.md lists the
policies) must be rejected.

No JSON Schema validator is installed here, so the expectations are written by hand, except
where plain arithmetic decides them (integer and number ranges, computed with Decimal below).

Usage: json_schema_cases.py [--check]
"""

import itertools
import json
import os
import sys
from decimal import Decimal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "grammar", "json_schema_cases.json")

CASES = []


def d(v):
    """Compact JSON text."""
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def p(v):
    """Pretty JSON text (two-space indent)."""
    return json.dumps(v, ensure_ascii=False, indent=2)


def case(name, schema, valid=(), invalid=(), policy=(), **options):
    c = {"name": name, "schema": schema}
    if options:
        c["options"] = options
    c["valid"] = list(valid)
    c["invalid"] = list(invalid)
    c["policy_rejected"] = list(policy)
    CASES.append(c)


# ---------------------------------------------------------------- scalars
case("string", {"type": "string"},
     valid=['""', '"abc"', r'"a\"b"', r'"\u00e9\n\t\/\\"', '"é😀"', r'"\uD83D\uDE00"', '"\x7f"',
            r'"\b\f\r"', '"\u2028"'],
     invalid=["abc", '"abc', '"a\nb"', '"a\x01"', r'"\x41"', r'"\u12"', r'"\U0001F600"', "1",
              "null", "'a'", '"a""b"', r'"\uD800"', r'"\uDC00x"', r'"\uDE00\uD83D"'],
     policy=[' "a"', '"a" ', '"a"\n'])
case("number", {"type": "number"},
     valid=["0", "-0", "1.5", "-12.5e+3", "1E5", "0.0", "123456789012345678901234567890", "1e-7",
            "-0.0e0"],
     invalid=["01", "1.", ".5", "+1", "1e", "NaN", "Infinity", "- 1", "0x10", '"1"', "--1",
              "1.2.3", "1e+", ""],
     policy=["1 ", " 1"])
case("integer", {"type": "integer"},
     valid=["0", "-7", "123", "-0", "98765432109876543210"],
     invalid=["01", "1e2x", "-", "1.5", '"1"', "true"],
     policy=["1.0", "1e2"])
case("boolean", {"type": "boolean"}, valid=["true", "false"],
     invalid=["True", "1", '"true"', "null", "tru"])
case("null", {"type": "null"}, valid=["null"], invalid=["Null", "nil", '"null"', "0", ""])
case("type list string or null", {"type": ["string", "null"]},
     valid=['"x"', "null"], invalid=["1", "false", "{}"])
case("type list integer number", {"type": ["integer", "number"]},
     valid=["1", "1.5", "-2e3"], invalid=['"1"'])
case("any value (true)", True,
     valid=["1", '"a"', "null", "[]", "{}", d({"a": [1, {"b": None}]}), p({"a": [1, {"b": None}]})],
     invalid=["", "{", "[1,]", "undefined"])
case("any value ({})", {},
     valid=["true", "[1,2,3]", d({"k": "v"})], invalid=["{]", "'x'"])
case("only annotations", {"title": "T", "description": "D", "examples": [1], "default": 1,
                          "$schema": "https://json-schema.org/draft/2020-12/schema",
                          "$id": "https://example.com/s", "$comment": "c", "deprecated": False,
                          "readOnly": False, "writeOnly": False},
     valid=["1", '"x"', "{}"], invalid=["x"])

# ---------------------------------------------------------------- enum / const
case("enum mixed", {"enum": ["a", 1, None, True, {"x": [1]}, [1, 2], 1.5, "é\n"]},
     valid=['"a"', "1", "null", "true", d({"x": [1]}), '{ "x" : [ 1 ] }', "[1,2]", "[1, 2]", "1.5",
            r'"é\n"'],
     invalid=['"b"', "2", "false", '{"x":[2]}', "[2,1]", '"é\n"', '"A"', "[1,2,]"],
     policy=["1.50", "1.0", '"\\u0061"'])
case("enum with type filter", {"type": "string", "enum": ["a", 1, "b"]},
     valid=['"a"', '"b"'], invalid=["1", '"c"'])
case("const string", {"const": "hello"}, valid=['"hello"'], invalid=['"hell"', '"hello "', "hello"])
case("const object", {"const": {"a": 1, "b": [True]}},
     valid=[d({"a": 1, "b": [True]}), p({"a": 1, "b": [True]})],
     invalid=[d({"a": 1}), d({"a": 1, "b": [False]})],
     policy=[d({"b": [True], "a": 1})])
case("enum and const", {"enum": ["a", "b"], "const": "b"}, valid=['"b"'], invalid=['"a"'])

# ---------------------------------------------------------------- objects
person = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]}
case("object required and optional", person,
     valid=['{"name":"x"}', '{"name":"x","age":3}', p({"name": "x", "age": 3}),
            '{ "name" : "x" , "age" : 3 }', '{"name":""}'],
     invalid=["{}", '{"age":3}', '{"name":1}', '{"name":"x",}', '{"name":"x""age":3}',
              '{"name":"x","age":"3"}', '{"name":"x","age":}', '{"name":"x",,"age":3}',
              '{"name":"x"', '"name"', "[]", '{"name":"x","age":3.5}'],
     policy=['{"age":3,"name":"x"}', '{"name":"x","extra":1}', '{"name":"x","age":1.0}'])

four = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcd"}}
subsets = [c for n in range(5) for c in itertools.combinations("abcd", n)]
case("object four optional, every subset", four,
     valid=[d({k: i for i, k in enumerate(s)}) for s in subsets] +
           [p({k: i for i, k in enumerate(s)}) for s in subsets],
     invalid=['{,"a":1}', '{"a":1,}', '{"a":1,,"b":2}', '{"a":1 "b":2}', '{,}', '{"a":1}{',
              '{"a":"x"}', '{"e":1}x'],
     policy=['{"b":1,"a":2}', '{"d":1,"c":2}', '{"e":1}', '{"a":1,"a":2}'])

mixed_names = ["a", "b", "c", "d", "e"]
mixed = {"type": "object",
         "properties": {k: {"type": "string"} for k in mixed_names},
         "required": ["b", "d"]}
mixed_valid = []
for keep in itertools.product([False, True], repeat=3):
    present = [k for k in mixed_names
               if k in ("b", "d") or keep[{"a": 0, "c": 1, "e": 2}[k]]]
    mixed_valid.append(d({k: k for k in present}))
case("object optional around required", mixed,
     valid=mixed_valid,
     invalid=['{"a":"a","d":"d"}', '{"b":"b"}', '{"b":"b","c":"c"}', "{}", '{"a":"a"}',
              '{"b":"b","d":"d",}', '{,"b":"b","d":"d"}'],
     policy=['{"d":"d","b":"b"}', '{"b":"b","d":"d","a":"a"}'])

case("object additionalProperties true",
     {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True},
     valid=['{"a":1,"zz":[1,{}]}', '{"zz":null}', '{"a":1}', "{}", '{"b":1,"c":2}',
            '{"a":1,"b":"x","c":{"d":[]}}', '{"":0}', '{"aa":"x"}'],
     invalid=['{"a":"x"}', '{"a":1,"zz"}', '{"zz":1,}', '{"a":"x","b":1}'],
     policy=['{"zz":1,"a":1}', '{"\\u0061":1}', '{"\\u0062":1}'])
case("object additionalProperties schema",
     {"type": "object", "properties": {"name": {"type": "string"}},
      "additionalProperties": {"type": "integer"}},
     valid=['{"name":"x","k":1}', '{"k":1,"j":2}', '{"name":"x","name2":3}', '{"nam":3}',
            '{"n":1}', '{"":1}', '{"Name":1}', '{"name":"x","nom\\"e":1}', '{"é":1}',
            '{"a\\nb":1}', '{"a\\u0001b":1}'],
     invalid=['{"k":"s"}', '{"name":1}', '{"na\\u006de":3}', '{"name":"x","k":1.5}'],
     policy=['{"k":1,"name":"x"}', '{"n\\/":1}'])
case("object additionalProperties false, no properties",
     {"type": "object", "additionalProperties": False},
     valid=["{}", "{ }", "{\n}"], invalid=['{"a":1}', "{,}", "[]"])
case("object with no properties keyword", {"type": "object"},
     valid=["{}"], invalid=["[]"], policy=['{"a":1}'])
case("object inferred from properties",
     {"properties": {"x": {"type": "boolean"}}, "required": ["x"]},
     valid=['{"x":true}'], invalid=['{"x":1}', "{}"], policy=["1", '"s"'])
case("object false property schema",
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": False},
      "additionalProperties": True},
     valid=['{"a":1}', '{"c":1}', "{}"], invalid=['{"b":1}', '{"a":1,"b":1}'])
case("object required but only in additionalProperties",
     {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["z"],
      "additionalProperties": {"type": "string"}},
     valid=['{"z":"x"}', '{"a":1,"z":"x"}', '{"a":1,"z":"x","y":"w"}'],
     invalid=['{"a":1}', "{}", '{"z":1}'],
     policy=['{"z":"x","a":1}'])
case("object unicode and escaped names",
     {"type": "object",
      "properties": {"名前": {"type": "string"}, "a\"b": {"type": "integer"},
                     "c\\d": {"type": "null"}, "tab\there": {"type": "boolean"}},
      "required": ["名前", "a\"b", "c\\d", "tab\there"]},
     valid=['{"名前":"x","a\\"b":1,"c\\\\d":null,"tab\\there":true}'],
     invalid=['{"名前":"x","a"b":1,"c\\\\d":null,"tab\\there":true}',
              '{"名前":"x","a\\"b":1,"c\\\\d":null,"tab\there":true}'],
     policy=['{"\\u540d\\u524d":"x","a\\"b":1,"c\\\\d":null,"tab\\there":true}'])
nested = {"type": "object",
          "properties": {
              "user": {"type": "object",
                       "properties": {"id": {"type": "integer"},
                                      "tags": {"type": "array", "items": {"type": "string"}}},
                       "required": ["id"]},
              "active": {"type": "boolean"}},
          "required": ["user"]}
case("nested objects and arrays", nested,
     valid=[d({"user": {"id": 1}}), d({"user": {"id": 1, "tags": ["a", "b"]}, "active": False}),
            p({"user": {"id": 1, "tags": []}, "active": True})],
     invalid=[d({"user": {}}), d({"user": {"id": 1, "tags": [1]}}), d({"active": True}),
              d({"user": {"id": 1}, "active": "yes"})],
     policy=[d({"user": {"id": 1, "name": "x"}})])
weather = {"type": "object",
           "properties": {"location": {"type": "string", "description": "City"},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["location", "unit"], "additionalProperties": False}
case("openai style tool parameters", weather,
     valid=[d({"location": "Paris", "unit": "celsius"}),
            p({"location": "Paris", "unit": "fahrenheit"})],
     invalid=[d({"location": "Paris"}), d({"location": "Paris", "unit": "kelvin"}),
              d({"location": "Paris", "unit": "celsius", "x": 1})])
case("strict mode makes every property required",
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
     valid=['{"a":"x","b":1}'], invalid=['{"a":"x"}', '{"b":1}', "{}"], strict=True)
case("no whitespace", {"type": "object", "properties": {"a": {"type": "array"}},
                       "required": ["a"]},
     valid=['{"a":[1,2]}', '{"a":[]}'],
     invalid=['{"a": [1,2]}', '{ "a":[1,2]}', '{"a":[1, 2]}', '{"a":[ ]}', '{"a":[1,2]} '],
     max_whitespace=0)
case("two whitespace bytes per gap", {"type": "array", "items": {"type": "integer"}},
     valid=["[1,2]", "[  1 ,\t\n2\r\n]", "[  ]", "[ 1  ]"],
     invalid=["[   1]", "[1   ,2]", "[1,   2]", "[1   ]", "[1 ,  \n 2]", "[\x0b1]"],
     max_whitespace=2)

# ---------------------------------------------------------------- arrays
case("array min/max items", {"type": "array", "items": {"type": "integer"}, "minItems": 2,
                             "maxItems": 4},
     valid=["[1,2]", "[1,2,3,4]", "[1, 2, 3]"],
     invalid=["[1]", "[1,2,3,4,5]", "[]", '[1,"a"]', "[1,2,]", "[,1,2]", "[1 2]"])
case("array maxItems 0", {"type": "array", "maxItems": 0}, valid=["[]", "[ ]"],
     invalid=["[1]", "[null]"])
case("array any items", {"type": "array"},
     valid=["[]", '[1,"a",{"b":[null]},[[]]]'], invalid=["[", "[1,]"])
case("array minItems only", {"type": "array", "items": {"type": "boolean"}, "minItems": 1},
     valid=["[true]", "[true,false,true]"], invalid=["[]", "[1]"])
case("prefixItems without items",
     {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
     valid=["[]", '["a"]', '["a",1]'], invalid=["[1]", '["a","b"]', '[,"a"]'],
     policy=['["a",1,2]', '["a",1,"x"]'])
case("prefixItems with items and minItems",
     {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"},
      "minItems": 2},
     valid=['["a",true]', '["a",true,false]'], invalid=['["a"]', "[true,true]", "[]", '["a",1]'])
case("prefixItems with items false and maxItems",
     {"type": "array", "prefixItems": [{"type": "null"}, {"type": "null"}, {"type": "null"}],
      "items": False, "maxItems": 2},
     valid=["[]", "[null]", "[null,null]"], invalid=["[null,null,null]", "[1]"])
case("prefixItems all required",
     {"type": "array", "prefixItems": [{"const": 1}, {"const": 2}], "minItems": 2,
      "items": {"type": "string"}, "maxItems": 3},
     valid=["[1,2]", '[1,2,"x"]'], invalid=["[1]", '[1,2,"x","y"]', "[2,1]", "[1,2,3]"])
case("draft 4 tuple items and additionalItems",
     {"type": "array", "items": [{"type": "integer"}, {"type": "string"}],
      "additionalItems": {"type": "null"}},
     valid=["[]", "[1]", '[1,"a"]', '[1,"a",null,null]'],
     invalid=['["a"]', '[1,"a",1]'])
case("uniqueItems false is fine", {"type": "array", "uniqueItems": False, "items": {"const": 1}},
     valid=["[1,1]"], invalid=["[2]"])

# ---------------------------------------------------------------- strings
case("string length", {"type": "string", "minLength": 2, "maxLength": 3},
     valid=['"ab"', '"abc"', '"é😀"', r'"\n\t"', r'"\u00e9a"', r'"\"\\"', r'"ab\/"'],
     invalid=['"a"', '"abcd"', '""', r'"\uD83D\uDE00"', r'"\u00e9"', r'"\n"'],
     policy=[r'"\uD83D\uDE00a"'])
case("string exact length 0", {"type": "string", "maxLength": 0}, valid=['""'], invalid=['"a"'])
case("string minLength only", {"type": "string", "minLength": 1},
     valid=['"a"', '"abcdefghijklmnopqrstuvwxyz"'], invalid=['""'])
case("pattern anchored", {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
     valid=['"AB-123"'], invalid=['"AB-1234"', '"ab-123"', '"xAB-123"', 'AB-123'])
case("pattern with quote and backslash", {"type": "string", "pattern": '^a"b\\\\c$'},
     valid=[r'"a\"b\\c"'], invalid=['"a"b\\c"', r'"a\"b\c"'], policy=[r'"a\u0022b\\c"'])
case("format date", {"type": "string", "format": "date"},
     valid=['"2024-02-29"', '"2000-02-29"', '"2023-12-31"', '"0000-02-29"', '"1999-04-30"',
            '"2023-01-31"', '"0400-02-29"', '"2400-02-29"', '"1996-02-29"'],
     invalid=['"2023-02-29"', '"1900-02-29"', '"2024-13-01"', '"2024-04-31"', '"2024-1-01"',
              '"24-01-01"', '"2100-02-29"', '"0100-02-29"', '"2024-00-10"', '"2024-01-00"', '"2024-01-32"', "2024-01-01"])
case("format time", {"type": "string", "format": "time"},
     valid=['"23:59:59Z"', '"00:00:00.123+05:30"', '"12:00:00-08:00"'],
     invalid=['"24:00:00Z"', '"12:00:00"', '"12:60:00Z"', '"12:00:00+24:00"', '"1:00:00Z"'],
     policy=['"23:59:60Z"', '"12:00:00z"'])
case("format date-time", {"type": "string", "format": "date-time"},
     valid=['"2024-02-29T23:59:59Z"', '"1985-04-12T23:20:50.52+01:00"'],
     invalid=['"2024-02-30T00:00:00Z"', '"2024-02-29 23:59:59Z"', '"2024-02-29T23:59:59"'],
     policy=['"2024-02-29t23:59:59z"'])
case("format uuid", {"type": "string", "format": "uuid"},
     valid=['"123e4567-e89b-12d3-a456-426614174000"', '"00000000-0000-0000-0000-000000000000"',
            '"ABCDEF01-2345-6789-ABCD-EF0123456789"'],
     invalid=['"123e4567e89b12d3a456426614174000"', '"123e4567-e89b-12d3-a456-42661417400g"',
              '"{123e4567-e89b-12d3-a456-426614174000}"'])
case("format email", {"type": "string", "format": "email"},
     valid=['"a@b.co"', '"first.last+tag@sub.example.com"', '"x@localhost"', '"o\'neil@x.org"'],
     invalid=['"a@"', '"@b.com"', '"a..b@c.com"', '"a@-b.com"', '"a b@c.com"', '".a@b.com"',
              '"a@b-.com"', '"a@b..com"'],
     policy=['"\\"quoted\\"@example.com"', '"a@[127.0.0.1]"'])
case("format ipv4", {"type": "string", "format": "ipv4"},
     valid=['"0.0.0.0"', '"255.255.255.255"', '"192.168.1.1"', '"10.0.0.99"'],
     invalid=['"256.0.0.0"', '"01.1.1.1"', '"1.1.1"', '"1.1.1.1.1"', '"1.1.1.a"', '"1..1.1"'])

# ---------------------------------------------------------------- numeric ranges
def integer_case(name, schema, lo, hi, lo_excl=False, hi_excl=False):
    def ok(v):
        if lo is not None and (v < lo or (lo_excl and v == lo)):
            return False
        if hi is not None and (v > hi or (hi_excl and v == hi)):
            return False
        return True
    probes = {0, 1, -1, 9, 10, 11, 99, 100, 101, -9, -10, -11, -100, 999, 1000, 1001, -999, -1000,
              123456, -123456, 10 ** 12, -(10 ** 12)}
    for b in (lo, hi):
        if b is not None:
            probes.update(range(b - 12, b + 13))
            probes.update({b * 10, b * 10 + 9, b // 10})
    values = sorted(probes)
    case(name, {"type": "integer", **schema},
         valid=[str(v) for v in values if ok(v)],
         invalid=[str(v) for v in values if not ok(v)] + ["1.5", "01", "--1"],
         policy=[str(v) + ".0" for v in values if ok(v)][:3] + (["-0"] if ok(0) else []))


integer_case("integer 0..100", {"minimum": 0, "maximum": 100}, 0, 100)
integer_case("integer -100..-5", {"minimum": -100, "maximum": -5}, -100, -5)
integer_case("integer -5..5", {"minimum": -5, "maximum": 5}, -5, 5)
integer_case("integer exclusive 0..10", {"exclusiveMinimum": 0, "exclusiveMaximum": 10}, 0, 10,
             True, True)
integer_case("integer minimum 7", {"minimum": 7}, 7, None)
integer_case("integer maximum -3", {"maximum": -3}, None, -3)
integer_case("integer exclusiveMaximum -3", {"exclusiveMaximum": -3}, None, -3, False, True)
integer_case("integer 123..45678", {"minimum": 123, "maximum": 45678}, 123, 45678)
integer_case("integer 0..0", {"minimum": 0, "maximum": 0}, 0, 0)
integer_case("integer 999..1001", {"minimum": 999, "maximum": 1001}, 999, 1001)
integer_case("integer 1000..1999", {"minimum": 1000, "maximum": 1999}, 1000, 1999)
integer_case("integer 19..91", {"minimum": 19, "maximum": 91}, 19, 91)
integer_case("integer float bounds rounded inward", {"minimum": 1.5, "maximum": 7.9}, 2, 7)
integer_case("integer draft 4 exclusive", {"minimum": 3, "exclusiveMinimum": True,
                                           "maximum": 30, "exclusiveMaximum": True}, 3, 30,
             True, True)
integer_case("integer both minimum and exclusiveMinimum",
             {"minimum": 5, "exclusiveMinimum": 5, "maximum": 50, "exclusiveMaximum": 60},
             5, 50, True, False)
integer_case("integer 53-bit range", {"minimum": -9007199254740991,
                                      "maximum": 9007199254740991},
             -9007199254740991, 9007199254740991)
integer_case("integer multipleOf 1", {"multipleOf": 1, "minimum": 1}, 1, None)


def number_case(name, schema, lo, hi, lo_excl=False, hi_excl=False):
    def ok(s):
        v = Decimal(s)
        if lo is not None and (v < lo or (lo_excl and v == lo)):
            return False
        if hi is not None and (v > hi or (hi_excl and v == hi)):
            return False
        return True
    probes = ["0", "0.0", "0.5", "0.05", "1", "1.0", "1.000", "0.999", "1.01", "1.001", "-0.1",
              "-1", "-1.5", "2", "10", "10.0", "10.5", "9.99", "-10", "-10.0", "-10.01", "-9.5",
              "100", "99.9999", "123.456", "-0.000001", "0.000001", "5", "4.9", "5.1", "-5",
              "-4.9", "-5.1", "5.0", "-5.0"]
    for b in (lo, hi):
        if b is not None:
            probes += [str(b), str(b) + ".0", str(b) + ".01", str(b - 1) + ".99",
                       str(b + 1), str(b - 1)]
    probes = sorted(set(probes), key=lambda s: (Decimal(s), s))
    valid, invalid, policy = [], [], []
    for s in probes:
        # "-0" and "-0.0" equal 0 but the grammar writes zero without a sign.
        if ok(s) and not (s.startswith("-") and Decimal(s) == 0):
            valid.append(s)
        elif ok(s):
            policy.append(s)
        else:
            invalid.append(s)
    policy += [s + "e0" for s in valid[:2]]
    invalid += ["1.", ".5", "01"]
    case(name, {"type": "number", **schema}, valid=valid, invalid=invalid, policy=policy)


number_case("number 0..1", {"minimum": 0, "maximum": 1}, 0, 1)
number_case("number exclusive 0..10", {"exclusiveMinimum": 0, "exclusiveMaximum": 10}, 0, 10,
            True, True)
number_case("number minimum -5", {"minimum": -5}, -5, None)
number_case("number exclusiveMinimum -5", {"exclusiveMinimum": -5}, -5, None, True)
number_case("number maximum 5", {"maximum": 5}, None, 5)
number_case("number exclusiveMaximum 0", {"exclusiveMaximum": 0}, None, 0, False, True)
number_case("number -10..-1", {"minimum": -10, "maximum": -1}, -10, -1)
number_case("number -1..100 exclusive max", {"minimum": -1, "exclusiveMaximum": 100}, -1, 100,
            False, True)
number_case("number float bounds that are integers", {"minimum": 2.0, "maximum": 5.0}, 2, 5)

# ---------------------------------------------------------------- composition and $ref
case("anyOf", {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
     valid=['"a"', "5", "0"], invalid=["-1", "null", "1.5"])
case("oneOf discriminated union",
     {"oneOf": [{"type": "object", "properties": {"kind": {"const": "cat"},
                                                  "meow": {"type": "boolean"}},
                 "required": ["kind", "meow"]},
                {"type": "object", "properties": {"kind": {"const": "dog"},
                                                  "bark": {"type": "integer"}},
                 "required": ["kind", "bark"]}],
      "discriminator": {"propertyName": "kind"}},
     valid=[d({"kind": "cat", "meow": True}), d({"kind": "dog", "bark": 3})],
     invalid=[d({"kind": "cat", "bark": 3}), d({"kind": "dog", "meow": True}),
              d({"kind": "cow", "meow": True})])
case("anyOf with sibling keywords",
     {"type": "string", "anyOf": [{"maxLength": 2}, {"format": "date"}]},
     valid=['"ab"', '"2024-01-01"', '""'], invalid=['"abc"', "1"])
case("anyOf of required lists next to properties",
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
     valid=['{"a":1}', '{"b":2}', '{"a":1,"b":2}'], invalid=["{}", '{"a":"x"}'],
     policy=['{"b":2,"a":1}'])
case("nullable via anyOf", {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "x"},
     valid=['"x"', "null"], invalid=["1"])
case("allOf one element", {"allOf": [{"type": "integer", "minimum": 3}]},
     valid=["3", "100"], invalid=["2", '"3"'])
case("allOf merging a $ref base",
     {"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}},
                         "required": ["id"]}},
      "allOf": [{"$ref": "#/$defs/base"},
                {"properties": {"name": {"type": "string"}}, "required": ["name"]}]},
     valid=[d({"id": 1, "name": "x"})],
     invalid=[d({"id": 1}), d({"name": "x"}), d({"id": "1", "name": "x"})],
     policy=[d({"name": "x", "id": 1})])
case("allOf tightening bounds",
     {"allOf": [{"type": "integer", "minimum": 0, "maximum": 10}, {"minimum": 5},
                {"maximum": 20}]},
     valid=["5", "10"], invalid=["4", "11", "-1"])
case("$ref to $defs", {"$defs": {"name": {"type": "string", "maxLength": 3}},
                       "type": "object", "properties": {"n": {"$ref": "#/$defs/name"}},
                       "required": ["n"]},
     valid=['{"n":"abc"}'], invalid=['{"n":"abcd"}', '{"n":1}'])
case("$ref to definitions", {"definitions": {"flag": {"type": "boolean"}},
                             "type": "array", "items": {"$ref": "#/definitions/flag"}},
     valid=["[true,false]", "[]"], invalid=["[1]"])
case("$ref with sibling keywords",
     {"$defs": {"s": {"type": "string", "minLength": 1}}, "$ref": "#/$defs/s", "maxLength": 3},
     valid=['"a"', '"abc"'], invalid=['""', '"abcd"'])
case("$ref chain", {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}},
                    "$ref": "#/$defs/a"},
     valid=["1"], invalid=['"1"'])
case("$ref with escaped pointer", {"$defs": {"a/b": {"const": 1}, "c~d": {"const": 2},
                                             "e f": {"const": 3}},
                                   "type": "array",
                                   "prefixItems": [{"$ref": "#/$defs/a~1b"},
                                                   {"$ref": "#/$defs/c~0d"},
                                                   {"$ref": "#/$defs/e%20f"}]},
     valid=["[1,2,3]", "[1]"], invalid=["[2]", "[1,2,4]"])
case("recursive linked list",
     {"$defs": {"node": {"type": "object",
                         "properties": {"v": {"type": "integer"},
                                        "next": {"anyOf": [{"$ref": "#/$defs/node"},
                                                           {"type": "null"}]}},
                         "required": ["v", "next"]}},
      "$ref": "#/$defs/node"},
     valid=[d({"v": 1, "next": None}), d({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": None}}})],
     invalid=[d({"v": 1}), d({"v": 1, "next": {"v": 2}}), d({"v": 1, "next": 5})])
case("recursive tree through #",
     {"type": "object", "properties": {"value": {"type": "integer"},
                                       "children": {"type": "array", "items": {"$ref": "#"}}},
      "required": ["value"]},
     valid=[d({"value": 1}), d({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]},
                                                         {"value": 4}]})],
     invalid=[d({"value": 1, "children": [{}]}), d({"value": 1, "children": [1]})])
case("json_object", None, valid=["{}", d({"a": [1, {"b": None}], "c": "d"}), p({"x": {"y": []}})],
     invalid=["[]", "1", '"{}"', "{", '{"a"}', '{"a":1,}'])
CASES[-1]["json_object"] = True
del CASES[-1]["schema"]


def main():
    text = json.dumps(CASES, ensure_ascii=False, indent=1) + "\n"
    for c in CASES:
        for t in c["valid"]:
            json.loads(t)  # every valid instance must at least be JSON
    if "--check" in sys.argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit("json_schema_cases.json is out of date: run "
                         "scripts/grammar_oracle/json_schema_cases.py")
        print("json_schema_cases.json is up to date")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    n = sum(len(c["valid"]) + len(c["invalid"]) + len(c["policy_rejected"]) for c in CASES)
    print(f"wrote {OUT}: {len(CASES)} schemas, {n} instances")


if __name__ == "__main__":
    main()

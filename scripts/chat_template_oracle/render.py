#!/usr/bin/env python3
"""Reference renderer for Tandem's chat-template engine (src/chat_template).

Renders chat templates with Python Jinja2 set up the way transformers' apply_chat_template sets
it up, so the C++ engine can be checked byte for byte against it:

  * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
    extension and a {% generation %} tag (transformers' AssistantTracker; outside assistant-mask
    tracking it renders its body through a call block),
  * keep_trailing_newline left at Jinja's default (False),
  * the tojson filter replaced by json.dumps(x, ensure_ascii=False, indent=None,
    separators=None, sort_keys=False),
  * globals raise_exception(message) -> TemplateError(message) and strftime_now(format),
  * render(messages=..., tools=... or None, documents=None, add_generation_prompt=...,
    **special tokens, **chat_template_kwargs).

Written for this project from transformers' documented behaviour; no code is taken from it.

Modes:
  render.py fixtures DEST [--conversations FILE]
      DEST holds one folder per model (tokenizer_config.json and/or chat_template.jinja, as
      scripts/fetch_template_fixtures.sh lays it out). Renders every template x conversation and
      writes DEST/expected.json, including the exact context each render got and, where Jinja2
      raised, the error instead of the output.
  render.py check-features FILE [--update]
      FILE is tests/data/templates/feature_cases.json (the C++ unit cases). Checks every case's
      expected output or expected error against Jinja2; --update rewrites the expectations from
      Jinja2 instead.
"""

import argparse
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CONVERSATIONS = os.path.join(REPO, "tests", "data", "templates", "conversations.json")


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: a call block that returns its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _token_text(value):
    """bos/eos in tokenizer_config.json: a string or an AddedToken object with "content"."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ValueError(f"unexpected special token entry {value!r}")


def load_model_template(model_dir):
    """The same lookup as tandem::load_chat_template: chat_template.jinja, else
    tokenizer_config.json's chat_template (string, or the named list's "default")."""
    config = {}
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    source = None
    jinja_path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8", newline="") as f:
            source = f.read()
    else:
        t = config.get("chat_template")
        if isinstance(t, list):
            t = {e["name"]: e["template"] for e in t}.get("default")
        source = t
    if source is None:
        raise ValueError(f"{model_dir} has no chat template")
    return source, _token_text(config.get("bos_token")), _token_text(config.get("eos_token"))


def build_context(conv, bos, eos):
    """What apply_chat_template passes to render() for this conversation."""
    ctx = {
        "messages": conv["messages"],
        "tools": conv.get("tools"),
        "documents": None,
        "add_generation_prompt": conv.get("add_generation_prompt", False),
    }
    # transformers passes only the special tokens the tokenizer has (None ones are absent).
    if bos is not None:
        ctx["bos_token"] = bos
    if eos is not None:
        ctx["eos_token"] = eos
    ctx.update(conv.get("kwargs", {}))
    return ctx


def render(env, source, context):
    """Returns ("output", text) or ("error", (type name, message))."""
    try:
        return "output", env.from_string(source).render(**context)
    except jinja2.exceptions.TemplateSyntaxError:
        raise
    except Exception as e:  # the template failed at render time; the C++ engine must fail too
        return "error", (type(e).__name__, str(e))


def cmd_fixtures(args):
    with open(args.conversations, encoding="utf-8") as f:
        conversations = json.load(f)
    env = make_env()
    templates = []
    for name in sorted(os.listdir(args.dest)):
        model_dir = os.path.join(args.dest, name)
        if not os.path.isdir(model_dir):
            continue
        source, bos, eos = load_model_template(model_dir)
        entry = {"name": name, "dir": name, "bos_token": bos or "", "eos_token": eos or "",
                 "cases": []}
        counts = {"output": 0, "error": 0}
        for conv in conversations:
            ctx = build_context(conv, bos, eos)
            kind, result = render(env, source, ctx)
            case = {"conversation": conv["id"], "context": ctx}
            if kind == "output":
                case["output"] = result
            else:
                case["error_type"], case["error"] = result
            counts[kind] += 1
            entry["cases"].append(case)
        templates.append(entry)
        print(f"{name}: {counts['output']} rendered, {counts['error']} raised", file=sys.stderr)
    if not templates:
        sys.exit(f"no model folders in {args.dest}")
    out = {"jinja2_version": jinja2.__version__, "templates": templates}
    with open(os.path.join(args.dest, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


def cmd_check_features(args):
    with open(args.file, encoding="utf-8") as f:
        cases = json.load(f)
    env = make_env()
    failures = 0
    for case in cases:
        ctx = case.get("context", {})
        try:
            kind, result = render(env, case["template"], ctx)
        except jinja2.exceptions.TemplateSyntaxError as e:
            kind, result = "syntax_error", (type(e).__name__, str(e))
        if args.update:
            for k in ("expected", "error", "syntax_error"):
                case.pop(k, None)
            if kind == "output":
                case["expected"] = result
            elif kind == "error":
                case["error"] = True
            else:
                case["syntax_error"] = True
            continue
        if "expected" in case:
            ok = kind == "output" and result == case["expected"]
        elif case.get("error"):
            ok = kind == "error"
        else:
            ok = kind == "syntax_error" and case.get("syntax_error")
        if not ok:
            failures += 1
            print(f"MISMATCH {case['name']}: Jinja2 gives {kind} {result!r}", file=sys.stderr)
    if args.update:
        with open(args.file, "w", encoding="utf-8") as f:
            json.dump(cases, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"updated {len(cases)} cases from Jinja2 {jinja2.__version__}", file=sys.stderr)
        return
    print(f"{len(cases) - failures}/{len(cases)} feature cases agree with Jinja2 "
          f"{jinja2.__version__}", file=sys.stderr)
    if failures:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    fx = sub.add_parser("fixtures", help="render DEST's templates x conversations")
    fx.add_argument("dest")
    fx.add_argument("--conversations", default=DEFAULT_CONVERSATIONS)
    fx.set_defaults(fn=cmd_fixtures)
    fc = sub.add_parser("check-features", help="check the C++ feature cases against Jinja2")
    fc.add_argument("file")
    fc.add_argument("--update", action="store_true")
    fc.set_defaults(fn=cmd_check_features)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()

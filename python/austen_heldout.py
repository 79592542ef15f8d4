#!/usr/bin/env python3
"""Held-out Austen snippets for measuring speculative acceptance (no torch needed).

Reproduces train_austen.py's held-out split (seeded, pure Python) and writes N snippets of
held-out text, each the start of a paragraph, as JSON: python/austen_heldout.py CORPUS OUT.json
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from austen.data import read_books, split_books  # noqa: E402


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    _, held = split_books(read_books(corpus), seed=0)
    paras = [p for text in held for p in text.split("\n\n") if len(p) > 400]
    rng = random.Random(1234)
    picks = rng.sample(paras, n)
    json.dump([p[:600] for p in picks], open(out, "w"), indent=1)


if __name__ == "__main__":
    main()

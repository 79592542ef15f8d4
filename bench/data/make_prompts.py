#!/usr/bin/env python3
"""Writes prompts.txt, the text `tandem bench --dataset-name random` cuts its prompts from.

It is the held-out part of Jane Austen's novels in the default model's training split
(python/austen/data.py: split_books, seed 0, 5% of each book as one contiguous run of
paragraphs). Public-domain prose, so prompts read like real text (acceptance of speculative
decoding depends on the content), and text the shipped tandem-austen model never trained on,
so its accept length is not inflated by memorised prompts.

  python3 bench/data/make_prompts.py /work/shared/data/austen > bench/data/prompts.txt
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from austen.data import read_books, split_books  # noqa: E402


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/austen"
    _, held = split_books(read_books(corpus), seed=0)
    sys.stdout.write("\n\n".join(held) + "\n")


if __name__ == "__main__":
    main()

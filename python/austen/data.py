"""Jane Austen's novels: paragraphs, a seeded held-out split, and a byte-level BPE tokenizer."""
import os
import random

# GLM-4/GLM-5's split pattern (GPT-4 style), ahead of the byte-level mapping.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# GLM's special tokens; <|endoftext|>, <|user|> and <|observation|> end generation.
SPECIAL_TOKENS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                  "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>",
                  "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                  "<tool_response>", "</tool_response>"]
EOS_TOKENS = ["<|endoftext|>", "<|user|>", "<|observation|>"]


def read_books(corpus_dir):
    """{title: [paragraph, ...]} with the hard line wraps joined."""
    books = {}
    for name in sorted(os.listdir(corpus_dir)):
        if not name.endswith(".txt"):
            continue
        text = open(os.path.join(corpus_dir, name), encoding="utf-8").read()
        paras = []
        for block in text.split("\n\n"):
            p = " ".join(line.strip() for line in block.splitlines() if line.strip())
            if p:
                paras.append(p)
        books[name[:-4]] = paras
    return books


def split_books(books, held_out_fraction=0.05, seed=0):
    """Held-out text: a contiguous run of paragraphs from each book at a seeded offset."""
    rng = random.Random(seed)
    train, held = [], []
    for title in sorted(books):
        paras = books[title]
        n = max(1, int(len(paras) * held_out_fraction))
        start = rng.randrange(len(paras) // 10, len(paras) - n)
        held.append("\n\n".join(paras[start:start + n]))
        train.append("\n\n".join(paras[:start]))
        train.append("\n\n".join(paras[start + n:]))
    return train, held


def train_tokenizer(texts, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


class ByteTokenizer:
    """Stand-in for local dry runs where the tokenizers package is missing."""

    def __init__(self):
        self.n_special = len(SPECIAL_TOKENS)

    def encode_ids(self, text):
        return [self.n_special + b for b in text.encode("utf-8")]

    def get_vocab_size(self):
        return self.n_special + 256

    def token_to_id(self, t):
        return SPECIAL_TOKENS.index(t)


def encode(tok, text):
    if isinstance(tok, ByteTokenizer):
        return tok.encode_ids(text)
    return tok.encode(text).ids

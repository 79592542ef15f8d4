"""Held-out perplexity, greedy samples, and speculative-decoding acceptance counted in torch."""
import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def held_out_loss(model, windows, batch=32):
    """Mean next-token cross-entropy over held-out windows [N, S+1] (fp32, sparse attention)."""
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch):
        w = windows[i:i + batch]
        logits, _ = model(w[:, :-1])
        total += F.cross_entropy(logits.float().flatten(0, 1), w[:, 1:].flatten(), reduction="sum").item()
        count += w[:, 1:].numel()
    return total / count


@torch.no_grad()
def greedy(model, ids, n):
    """Greedy continuation by full recompute (no cache): ids [B, P] -> [B, P + n]."""
    cur = ids
    for _ in range(n):
        logits, _ = model(cur)
        cur = torch.cat([cur, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return cur


@torch.no_grad()
def draft_chain(model, hidden, seq, m, steps):
    """The S greedy drafts for a verify round whose first token is seq[m] (no target KV yet).

    Step 1 pairs (h_{m-1}, x_m) at position m-1 after the draft context (h_i, x_{i+1}), i < m-1;
    each later step feeds the draft's own hidden state and token, one position further, and
    attends to the earlier draft steps, as the engine's draft KV does.
    """
    pairs_h = hidden[:, :m]            # h_0 .. h_{m-1}
    pairs_x = seq[:, 1:m + 1]          # x_1 .. x_m
    drafts = []
    for _ in range(steps):
        logits, hv = model.forward_mtp(pairs_h, pairs_x)
        d = logits[:, -1].argmax(-1, keepdim=True)
        drafts.append(int(d))
        pairs_h = torch.cat([pairs_h, hv[:, -1:]], 1)
        pairs_x = torch.cat([pairs_x, d], 1)
    return drafts


@torch.no_grad()
def accept_length(model, prompts, gen_len, steps):
    """Greedy speculative decoding simulated exactly: tokens committed per verify round.

    With greedy sampling the committed text is the target's greedy continuation whatever the
    drafts, so each round accepts the longest prefix of drafts equal to that continuation.
    """
    rounds = committed = 0
    per_pos = [0] * steps
    seqs = greedy(model, prompts, gen_len)  # [N, P + gen_len], batched
    _, hiddens = model(seqs)
    P = prompts.shape[1]
    for i in range(seqs.shape[0]):
        seq, hidden = seqs[i:i + 1], hiddens[i:i + 1]
        m = P  # seq[P] is the first generated token: the first round's x_0
        while m + steps < seq.shape[1]:
            d = draft_chain(model, hidden, seq, m, steps)
            k = 0
            while k < steps and d[k] == int(seq[0, m + 1 + k]):
                per_pos[k] += 1
                k += 1
            rounds += 1
            committed += k + 1
            m += k + 1
    return committed / rounds, [c / rounds for c in per_pos], rounds

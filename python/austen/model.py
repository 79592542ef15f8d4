"""GlmMoeDsaForCausalLM at small scale, in plain torch, for training (and its MTP layer).

Module and parameter names follow the Hugging Face checkpoint layout so that export is a rename
of the stacked expert tensors only. Semantics follow transformers' GlmMoeDsa (checked after
export by loading the checkpoint in transformers): MLA with interleaved RoPE, the DSA lightning
indexer (ReLU scores, signed head weights, causal top-k) feeding sparse attention, GLM-5.2
IndexShare, sigmoid MoE with a selection-only correction bias and a shared expert, and the
MTP layer eh_proj([enorm(embed(x_{i+1})); hnorm(h_i)]) -> decoder layer -> shared_head.norm.
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 4096
    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 4
    q_lora_rank: int = 128
    kv_lora_rank: int = 128
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 16
    v_head_dim: int = 32
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    n_shared_experts: int = 1
    moe_intermediate_size: int = 192
    intermediate_size: int = 768
    first_k_dense_replace: int = 1
    routed_scaling_factor: float = 2.5
    index_n_heads: int = 16
    index_head_dim: int = 32
    index_topk: int = 64
    index_topk_freq: int = 4
    index_skip_topk_offset: int = 3
    rope_theta: float = 8e6
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096

    @property
    def indexer_types(self):
        return ["full" if max(i - self.index_skip_topk_offset + 1, 0) % self.index_topk_freq == 0 else "shared"
                for i in range(self.num_hidden_layers)]

    @property
    def mlp_layer_types(self):
        return ["dense" if i < self.first_k_dense_replace else "sparse" for i in range(self.num_hidden_layers)]


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rope_tables(cfg, S, device):
    d = cfg.qk_rope_head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
    ang = torch.arange(S, dtype=torch.float32, device=device)[:, None] * inv[None, :]
    return ang.cos(), ang.sin()  # [S, d/2]


def rope(x, cos, sin):
    """Interleaved pairs (2j, 2j+1). x: [B, S, h, d]; cos, sin: [S, d/2]."""
    c, s = cos[None, :, None, :].to(x.dtype), sin[None, :, None, :].to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1).flatten(-2)


class Indexer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wq_b = nn.Linear(cfg.q_lora_rank, cfg.index_n_heads * cfg.index_head_dim, bias=False)
        self.wk = nn.Linear(cfg.hidden_size, cfg.index_head_dim, bias=False)
        self.k_norm = nn.LayerNorm(cfg.index_head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(cfg.hidden_size, cfg.index_n_heads, bias=False)

    def forward(self, a, cq, cos, sin):
        """Index scores [B, S, S] in fp32, -inf above the diagonal."""
        c = self.cfg
        B, S, _ = a.shape
        dr, Hi, Di = c.qk_rope_head_dim, c.index_n_heads, c.index_head_dim
        q = self.wq_b(cq).view(B, S, Hi, Di)
        q = torch.cat([rope(q[..., :dr], cos, sin), q[..., dr:]], -1)  # per head [rope | nope]
        k = self.k_norm(self.wk(a).float()).to(a.dtype).view(B, S, 1, Di)
        k = torch.cat([rope(k[..., :dr], cos, sin), k[..., dr:]], -1)[:, :, 0]
        w = self.weights_proj(a).float() * (Hi ** -0.5) * (Di ** -0.5)
        s = torch.relu(torch.einsum("bshd,btd->bsht", q.float(), k.float()))
        score = torch.einsum("bsht,bsh->bst", s, w)
        causal = torch.ones(S, S, dtype=torch.bool, device=a.device).tril()
        return score.masked_fill(~causal, float("-inf"))


class Attention(nn.Module):
    def __init__(self, cfg, full_indexer):
        super().__init__()
        self.cfg = cfg
        H, dqk = cfg.num_attention_heads, cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        self.q_a_proj = nn.Linear(cfg.hidden_size, cfg.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
        self.q_b_proj = nn.Linear(cfg.q_lora_rank, H * dqk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(cfg.hidden_size, cfg.kv_lora_rank + cfg.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, cfg.rms_norm_eps)
        self.kv_b_proj = nn.Linear(cfg.kv_lora_rank, H * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False)
        self.o_proj = nn.Linear(H * cfg.v_head_dim, cfg.hidden_size, bias=False)
        self.indexer = Indexer(cfg) if full_indexer else None

    def forward(self, a, cos, sin, prev_sel, sparse, aux):
        c = self.cfg
        B, S, _ = a.shape
        H, dn, dr, dv, rkv = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim, c.kv_lora_rank
        cq = self.q_a_layernorm(self.q_a_proj(a))
        q = self.q_b_proj(cq).view(B, S, H, dn + dr)
        q_nope, q_pe = q[..., :dn], rope(q[..., dn:], cos, sin)
        ckv = self.kv_a_proj_with_mqa(a)
        c_kv = self.kv_a_layernorm(ckv[..., :rkv])
        k_pe = rope(ckv[..., rkv:].unsqueeze(2), cos, sin)[:, :, 0]
        kv = self.kv_b_proj(c_kv).view(B, S, H, dn + dv)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        scores = (torch.einsum("bshd,bthd->bhst", q_nope.float(), k_nope.float())
                  + torch.einsum("bshd,btd->bhst", q_pe.float(), k_pe.float())) * (dn + dr) ** -0.5
        causal = torch.ones(S, S, dtype=torch.bool, device=a.device).tril()
        sel, index_scores = prev_sel, None
        if self.indexer is not None:
            # The indexer trains only through its KL loss: its inputs are detached.
            index_scores = self.indexer(a.detach(), cq.detach(), cos, sin)
            top = index_scores.topk(min(c.index_topk, S), dim=-1).indices
            sel = torch.zeros(B, S, S, dtype=torch.bool, device=a.device).scatter_(-1, top, True) & causal
        mask = causal[None, None] & (sel[:, None] if (sparse and sel is not None) else True)
        probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        if index_scores is not None and aux is not None:
            # DSA's indexer objective: match the heads' summed attention distribution.
            target = probs.detach().sum(1) / H
            logq = torch.log_softmax(index_scores.masked_fill(~causal, -1e4), -1)
            aux["kl"] = aux.get("kl", 0.0) + F.kl_div(logq, target, reduction="sum") / (B * S)
        o = torch.einsum("bhst,bthd->bshd", probs.to(v.dtype), v).reshape(B, S, H * dv)
        return self.o_proj(o), sel


class MLP(nn.Module):
    def __init__(self, d, inter):
        super().__init__()
        self.gate_proj = nn.Linear(d, inter, bias=False)
        self.up_proj = nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Gate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.n_routed_experts, cfg.hidden_size))
        self.register_buffer("e_score_correction_bias", torch.zeros(cfg.n_routed_experts))


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        E, I, D = cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.hidden_size
        self.gate = Gate(cfg)
        # Stacked experts; export splits them into experts.{e}.{gate,up,down}_proj.
        self.experts_gate = nn.Parameter(torch.empty(E, I, D))
        self.experts_up = nn.Parameter(torch.empty(E, I, D))
        self.experts_down = nn.Parameter(torch.empty(E, D, I))
        self.shared_experts = MLP(D, I * cfg.n_shared_experts)

    def forward(self, f, aux):
        c = self.cfg
        shape = f.shape
        x = f.reshape(-1, shape[-1])
        s = torch.sigmoid(x.float() @ self.gate.weight.float().t())  # router in fp32
        idx = (s + self.gate.e_score_correction_bias).topk(c.num_experts_per_tok, dim=-1).indices
        w = s.gather(1, idx)
        w = w / (w.sum(-1, keepdim=True) + 1e-20) * c.routed_scaling_factor
        y = torch.zeros_like(x)
        for e in range(c.n_routed_experts):
            tok, slot = torch.where(idx == e)
            if tok.numel() == 0:
                continue
            xe = x[tok]
            h = F.silu(xe @ self.experts_gate[e].t().to(xe.dtype)) * (xe @ self.experts_up[e].t().to(xe.dtype))
            y.index_add_(0, tok, ((h @ self.experts_down[e].t().to(h.dtype)) * w[tok, slot, None]).to(y.dtype))
        if aux is not None:
            aux.setdefault("loads", []).append((self, torch.bincount(idx.flatten(), minlength=c.n_routed_experts)))
        return (y + self.shared_experts(x)).view(shape)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, moe, full_indexer):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, full_indexer)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MoE(cfg) if moe else MLP(cfg.hidden_size, cfg.intermediate_size)
        self.moe = moe

    def forward(self, h, cos, sin, prev_sel, sparse, aux):
        # Residual dropout during training only (Austen is small); inference is the plain layer.
        att, sel = self.self_attn(self.input_layernorm(h), cos, sin, prev_sel, sparse, aux)
        h = h + F.dropout(att, 0.1, self.training)
        f = self.post_attention_layernorm(h)
        return h + F.dropout(self.mlp(f, aux) if self.moe else self.mlp(f), 0.1, self.training), sel


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([
            DecoderLayer(cfg, cfg.mlp_layer_types[i] == "sparse", cfg.indexer_types[i] == "full")
            for i in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class SharedHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class MTP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.enorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.shared_head = SharedHead(cfg)
        self.layer = DecoderLayer(cfg, moe=True, full_indexer=True)


class GlmMoeDsa(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.mtp = MTP(cfg)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        for name, p in self.named_parameters():
            if p.dim() == 1:
                continue
            fan_in = p.shape[-1]
            nn.init.normal_(p, std=0.02 if "embed" in name else fan_in ** -0.5)
        for m in self.modules():
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, ids, sparse=True, aux=None):
        """ids [B, S] -> (logits [B, S, V], hidden [B, S, D] = the LM-head input)."""
        B, S = ids.shape
        cos, sin = rope_tables(self.cfg, S, ids.device)
        h = self.model.embed_tokens(ids)
        sel = None
        for layer in self.model.layers:
            h, sel = layer(h, cos, sin, sel, sparse, aux)
        hn = self.model.norm(h)
        return self.lm_head(hn), hn

    def forward_mtp(self, hidden, next_ids, sparse=True, aux=None):
        """hidden [B, S, D] at positions i, next_ids [B, S] = x_{i+1} -> (logits of x_{i+2}, draft hidden)."""
        B, S = next_ids.shape
        cos, sin = rope_tables(self.cfg, S, next_ids.device)
        m = self.mtp
        u = m.eh_proj(torch.cat([m.enorm(self.model.embed_tokens(next_ids)), m.hnorm(hidden)], -1))
        v, _ = m.layer(u, cos, sin, None, sparse, aux)
        hv = m.shared_head.norm(v)
        return self.lm_head(hv), hv

    @torch.no_grad()
    def update_routing_bias(self, aux, rate=1e-3):
        """Auxiliary-loss-free balancing: nudge each expert's selection bias toward equal load."""
        for moe, counts in aux.get("loads", []):
            load = counts.float() / counts.sum().clamp(min=1)
            moe.gate.e_score_correction_bias += rate * torch.sign(1.0 / load.numel() - load)

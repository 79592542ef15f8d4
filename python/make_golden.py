#!/usr/bin/env python3
"""Golden outputs for Tandem's CPU engine, from Hugging Face transformers.

Runs on the GPU machine (transformers 5.17, torch 2.11), on its CPU in fp32 so that nothing
(TF32, bf16 reductions) blurs the reference. For each tiny random configuration:

  * builds the transformers model (GlmMoeDsaForCausalLM with GLM-5.2 IndexShare,
    GlmMoeDsaForCausalLM as GLM-5, DeepseekV32ForCausalLM with grouped routing and YaRN,
    DeepseekV3ForCausalLM), re-initialised at unit activation scale (transformers' default
    std 0.02 makes attention uniform and routing a near-tie, which would test nothing), with
    weights rounded to bf16 so they can be stored at half size and loaded exactly;
  * saves it with save_pretrained (the real Hub layout) and adds an MTP layer at
    model.layers.{num_hidden_layers} (transformers has none);
  * records, for several prompts longer than index_topk, the logits at every position and a
    greedy continuation (full recompute each step, no cache);
  * checks an independent plain-torch reference of the whole model against transformers,
    then uses that reference for the MTP layer's logits.

Usage: python3 make_golden.py OUT_DIR
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

import transformers

torch.manual_seed(0)
torch.set_num_threads(8)

VOCAB = 272
PROMPT_LENS = [6, 21, 40]
GREEDY_STEPS = 16


def base_kwargs():
    return dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4,
                q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                v_head_dim=16, n_shared_experts=1, routed_scaling_factor=2.5,
                first_k_dense_replace=1, norm_topk_prob=True, max_position_embeddings=4096,
                rms_norm_eps=1e-6, tie_word_embeddings=False, num_nextn_predict_layers=1,
                bos_token_id=257, eos_token_id=[256, 260, 262], pad_token_id=256)


def configs():
    L = 6
    mlp_types = ["dense"] + ["sparse"] * (L - 1)
    # 16 indexer heads: with few heads, every head's ReLU is often zero for a key, and exact
    # ties at score 0 on the top-k boundary would make the selection implementation-defined.
    glm = dict(base_kwargs(), n_routed_experts=8, num_experts_per_tok=2, n_group=1, topk_group=1,
               index_topk=8, index_head_dim=16, index_n_heads=16, mlp_layer_types=mlp_types,
               rope_parameters={"rope_type": "default", "rope_theta": 8e6})
    # GLM-5.2 IndexShare: full(i) iff max(i - 3 + 1, 0) % 4 == 0 -> layers 0, 1, 2 full.
    glm52_types = ["full" if max(i - 3 + 1, 0) % 4 == 0 else "shared" for i in range(L)]
    yarn = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
            "original_max_position_embeddings": 1024, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale": 1.0, "mscale_all_dim": 1.0}
    ds = dict(base_kwargs(), n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
              rope_parameters=yarn)
    return [
        ("glm5.2", transformers.GlmMoeDsaConfig, transformers.GlmMoeDsaForCausalLM,
         dict(glm, indexer_types=glm52_types, index_topk_freq=4, index_skip_topk_offset=3)),
        ("glm5", transformers.GlmMoeDsaConfig, transformers.GlmMoeDsaForCausalLM,
         dict(glm, indexer_types=["full"] * L, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
        ("deepseek-v3.2", transformers.DeepseekV32Config, transformers.DeepseekV32ForCausalLM,
         dict(ds, index_topk=8, index_head_dim=16, index_n_heads=16)),
        # V3 also exercises a YaRN attention factor != 1 (mscale != mscale_all_dim).
        ("deepseek-v3", transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM,
         dict(ds, rope_parameters=dict(yarn, mscale_all_dim=0.8))),
    ]


# ----------------------------------------------------------------------------------------
# Weight initialisation at unit scale, rounded to bf16.

def reinit_(sd, gen):
    out = {}
    for name, t in sd.items():
        if name.endswith("e_score_correction_bias"):
            # Non-negative, so every selection score sigmoid + bias stays positive: DeepSeek-V3's
            # transformers code masks dropped groups with 0.0 rather than -inf, and a negative
            # score would let a dropped group's expert win there.
            v = 0.1 * torch.rand(t.shape, generator=gen)
        elif name.endswith("norm.weight") or name.endswith("layernorm.weight") or name.endswith("k_norm.weight"):
            v = 1.0 + 0.1 * torch.randn(t.shape, generator=gen)
        elif name.endswith(".bias"):
            v = 0.05 * torch.randn(t.shape, generator=gen)
        elif "embed_tokens" in name:
            v = torch.randn(t.shape, generator=gen)
        else:
            v = torch.randn(t.shape, generator=gen) / math.sqrt(t.shape[-1])
        out[name] = v.to(torch.bfloat16).float() if not name.endswith("e_score_correction_bias") else v.float()
    return out


# ----------------------------------------------------------------------------------------
# An independent plain-torch reference of the model, written from the architecture notes.

class Ref:
    def __init__(self, cfg, sd):
        self.c = cfg
        self.sd = sd
        self.eps = cfg["rms_norm_eps"]
        self.H = cfg["num_attention_heads"]
        self.dn, self.dr, self.dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.rkv = cfg["kv_lora_rank"]
        self.arch = cfg["architectures"][0]
        rp = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
        rp.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
        self.inv_freq, self.attn_factor, self.scale = self.rope_tables(rp)
        self.min_gap = float("inf")
        self.indexer = "index_topk" in cfg and self.arch != "DeepseekV3ForCausalLM"
        self.idx_interleave = self.arch == "GlmMoeDsaForCausalLM"
        L = cfg["num_hidden_layers"]
        self.full = [t == "full" for t in cfg.get("indexer_types") or ["full"] * L]
        self.is_moe = [t == "sparse" for t in cfg.get("mlp_layer_types") or
                    [("sparse" if i >= cfg["first_k_dense_replace"] else "dense") for i in range(L)]]

    def rope_tables(self, rp):
        d = self.dr
        base = rp.get("rope_theta", 10000.0)
        pos_freqs = base ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
        scale = (self.dn + self.dr) ** -0.5
        if rp.get("rope_type", "default") != "yarn":
            return 1.0 / pos_freqs, 1.0, scale
        factor = rp["factor"]
        orig = rp["original_max_position_embeddings"]

        def cdim(rot):
            return d * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(cdim(rp.get("beta_fast", 32))), 0)
        high = min(math.ceil(cdim(rp.get("beta_slow", 1))), d - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        extrap = 1 - ramp
        inv = (1.0 / (factor * pos_freqs)) * (1 - extrap) + (1.0 / pos_freqs) * extrap

        def ms(s, m):
            return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

        m, mad = rp.get("mscale"), rp.get("mscale_all_dim")
        af = ms(factor, m) / ms(factor, mad) if (m and mad) else ms(factor, 1.0)
        if mad:
            scale = scale * ms(factor, mad) ** 2
        return inv, af, scale

    def w(self, name):
        return self.sd[name]

    def rms(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, pos, interleave):  # x [S, h, d]
        ang = pos[:, None].float() * self.inv_freq[None, :]
        cos = (ang.cos() * self.attn_factor)[:, None, :]
        sin = (ang.sin() * self.attn_factor)[:, None, :]
        h = x.shape[-1] // 2
        x0, x1 = (x[..., 0::2], x[..., 1::2]) if interleave else (x[..., :h], x[..., h:])
        y0, y1 = x0 * cos - x1 * sin, x1 * cos + x0 * sin
        if interleave:
            return torch.stack([y0, y1], dim=-1).flatten(-2)
        return torch.cat([y0, y1], dim=-1)

    def index_topk(self, p, a, cq, pos):
        S = a.shape[0]
        Hi, Di, K = self.c["index_n_heads"], self.c["index_head_dim"], self.c["index_topk"]
        q = (cq @ self.w(p + "indexer.wq_b.weight").T).view(S, Hi, Di)
        q = torch.cat([self.rope(q[..., :self.dr], pos, self.idx_interleave), q[..., self.dr:]], -1)
        k = F.layer_norm(a @ self.w(p + "indexer.wk.weight").T, (Di,), self.w(p + "indexer.k_norm.weight"),
                         self.w(p + "indexer.k_norm.bias"), 1e-6)
        k = torch.cat([self.rope(k[:, None, :self.dr], pos, self.idx_interleave)[:, 0], k[:, self.dr:]], -1)
        hw = (a @ self.w(p + "indexer.weights_proj.weight").T) * Hi ** -0.5 * Di ** -0.5
        score = torch.einsum("sht,sh->st", torch.relu(torch.einsum("shd,td->sht", q, k)), hw)
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        score = score.masked_fill(~causal, float("-inf"))
        # Gap between the K-th and (K+1)-th visible scores: near zero means the top-k set is a
        # coin toss between implementations; make_golden redraws such prompts.
        for s in range(K, S):
            top = score[s, :s + 1].sort(descending=True).values
            gap = (top[K - 1] - top[K]).abs().item() / (top.abs().max().item() + 1e-30)
            self.min_gap = min(self.min_gap, gap)
        sel = torch.zeros(S, S, dtype=torch.bool)
        sel.scatter_(1, score.topk(min(K, S), dim=-1).indices, True)
        return sel & causal

    def attention(self, p, a, pos, sel):
        S, H, dn, dr, dv, rkv = a.shape[0], self.H, self.dn, self.dr, self.dv, self.rkv
        cq = self.rms(a @ self.w(p + "q_a_proj.weight").T, self.w(p + "q_a_layernorm.weight"))
        q = (cq @ self.w(p + "q_b_proj.weight").T).view(S, H, dn + dr)
        q_nope, q_pe = q[..., :dn], self.rope(q[..., dn:], pos, True)
        ckv = a @ self.w(p + "kv_a_proj_with_mqa.weight").T
        c = self.rms(ckv[:, :rkv], self.w(p + "kv_a_layernorm.weight"))
        k_pe = self.rope(ckv[:, None, rkv:], pos, True)  # [S, 1, dr]
        kv = (c @ self.w(p + "kv_b_proj.weight").T).view(S, H, dn + dv)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        scores = (torch.einsum("shd,thd->hst", q_nope, k_nope) +
                  torch.einsum("shd,td->hst", q_pe, k_pe[:, 0])) * self.scale
        mask = torch.ones(S, S, dtype=torch.bool).tril()
        if sel is not None:
            mask = mask & sel
        probs = scores.masked_fill(~mask[None], float("-inf")).softmax(-1)
        o = torch.einsum("hst,thd->shd", probs, v).reshape(S, H * dv)
        return o @ self.w(p + "o_proj.weight").T, cq

    def mlp(self, p, f):
        g = f @ self.w(p + "gate_proj.weight").T
        u = f @ self.w(p + "up_proj.weight").T
        return (F.silu(g) * u) @ self.w(p + "down_proj.weight").T

    def moe(self, p, f):
        c = self.c
        E, k, G, TG = c["n_routed_experts"], c["num_experts_per_tok"], c["n_group"], c["topk_group"]
        s = torch.sigmoid(f @ self.w(p + "gate.weight").T)
        choice = s + self.w(p + "gate.e_score_correction_bias")
        if G > 1:
            gs = choice.view(-1, G, E // G).topk(2, dim=-1).values.sum(-1)
            keep = torch.zeros_like(gs, dtype=torch.bool)
            keep.scatter_(1, gs.topk(TG, dim=-1).indices, True)
            choice = choice.masked_fill(~keep.repeat_interleave(E // G, dim=1), float("-inf"))
        idx = choice.topk(k, dim=-1).indices
        wts = s.gather(1, idx)
        wts = wts / (wts.sum(-1, keepdim=True) + 1e-20) * c["routed_scaling_factor"]
        y = torch.zeros_like(f)
        for t in range(f.shape[0]):
            for j in range(k):
                e = int(idx[t, j])
                y[t] += wts[t, j] * self.mlp(p + f"experts.{e}.", f[t:t + 1])[0]
        return y + self.mlp(p + "shared_experts.", f)

    def layer(self, l, x, pos, prev_sel, full, moe):
        p = f"model.layers.{l}."
        a = self.rms(x, self.w(p + "input_layernorm.weight"))
        sel = prev_sel
        if self.indexer and full:
            # the indexer needs cq, computed inside attention; recompute it here the same way
            cq = self.rms(a @ self.w(p + "self_attn.q_a_proj.weight").T, self.w(p + "self_attn.q_a_layernorm.weight"))
            sel = self.index_topk(p + "self_attn.", a, cq, pos)
        att, _ = self.attention(p + "self_attn.", a, pos, sel if self.indexer else None)
        h = x + att
        f = self.rms(h, self.w(p + "post_attention_layernorm.weight"))
        h = h + (self.moe(p + "mlp.", f) if moe else self.mlp(p + "mlp.", f))
        return h, sel

    def forward(self, ids):
        pos = torch.arange(len(ids))
        h = self.w("model.embed_tokens.weight")[ids]
        sel = None
        for l in range(self.c["num_hidden_layers"]):
            h, sel = self.layer(l, h, pos, sel, self.full[l], self.is_moe[l])
        hn = self.rms(h, self.w("model.norm.weight"))
        return hn @ self.w("lm_head.weight").T, hn

    def mtp(self, ids, hidden):
        """Draft logits: position i pairs token ids[i+1] with the main model's hidden h_i."""
        L = self.c["num_hidden_layers"]
        p = f"model.layers.{L}."
        n = len(ids) - 1
        pos = torch.arange(n)
        e = self.rms(self.w("model.embed_tokens.weight")[ids[1:]], self.w(p + "enorm.weight"))
        g = self.rms(hidden[:n], self.w(p + "hnorm.weight"))
        u = torch.cat([e, g], -1) @ self.w(p + "eh_proj.weight").T
        v, _ = self.layer(L, u, pos, None, True, True)
        return self.rms(v, self.w(p + "shared_head.norm.weight")) @ self.w("lm_head.weight").T


def mtp_weights(cfg, sd, gen):
    """Random MTP-layer tensors named as real checkpoints name them."""
    L = cfg["num_hidden_layers"]
    src = f"model.layers.{L - 1}."  # a MoE layer (with a full indexer when the model has one)
    dst = f"model.layers.{L}."
    out = {}
    for name, t in sd.items():
        if name.startswith(src):
            out[dst + name[len(src):]] = t
    if not any(k.startswith(dst + "self_attn.indexer.") for k in out) and "index_topk" in cfg \
            and cfg["architectures"][0] != "DeepseekV3ForCausalLM":
        for name, t in sd.items():
            if name.startswith("model.layers.0.self_attn.indexer."):
                out[dst + name[len("model.layers.0."):]] = t
    D = cfg["hidden_size"]
    out[dst + "enorm.weight"] = torch.ones(D)
    out[dst + "hnorm.weight"] = torch.ones(D)
    out[dst + "eh_proj.weight"] = torch.zeros(D, 2 * D)
    out[dst + "shared_head.norm.weight"] = torch.ones(D)
    out = reinit_(out, gen)
    if cfg["architectures"][0] != "GlmMoeDsaForCausalLM":
        # DeepSeek ships duplicates of the embedding and head in the MTP layer.
        out[dst + "embed_tokens.weight"] = sd["model.embed_tokens.weight"].clone()
        out[dst + "shared_head.head.weight"] = sd["lm_head.weight"].clone()
    return out


def main():
    out_root = sys.argv[1]
    print("transformers", transformers.__version__, "torch", torch.__version__)
    summary = []
    for name, cfg_cls, model_cls, kw in configs():
        gen = torch.Generator().manual_seed(1234)
        cfg = cfg_cls(**kw)
        cfg._attn_implementation = "eager"
        model = model_cls(cfg).float().eval()
        sd = reinit_(model.state_dict(), gen)
        model.load_state_dict(sd, strict=True)
        d = os.path.join(out_root, name)
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(d, safe_serialization=True)
        cfg_json = json.load(open(os.path.join(d, "config.json")))
        print(f"== {name}: indexer_types={cfg_json.get('indexer_types')} "
              f"rope={cfg_json.get('rope_parameters')} rope_interleave={cfg_json.get('rope_interleave')} "
              f"indexer_rope_interleave={cfg_json.get('indexer_rope_interleave')}")
        # The on-disk tensors, as Tandem will read them (transformers may repack experts).
        files = [f for f in os.listdir(d) if f.endswith(".safetensors")]
        disk = {}
        for f in files:
            disk.update(load_file(os.path.join(d, f)))
        print(f"   {len(disk)} tensors on disk, e.g. {sorted(disk)[:3]}")
        ref = Ref(cfg_json, {k: v.float() for k, v in disk.items()})
        mtp = mtp_weights(cfg_json, ref.sd, gen)
        ref.sd.update({k: v.float() for k, v in mtp.items()})
        # Store everything in one file (bf16 except the fp32 routing bias).
        store = {k: (v if k.endswith("e_score_correction_bias") else v.to(torch.bfloat16)).contiguous()
                 for k, v in {**disk, **mtp}.items()}
        for f in files:
            os.remove(os.path.join(d, f))
        idx = os.path.join(d, "model.safetensors.index.json")
        if os.path.exists(idx):
            os.remove(idx)
        save_file(store, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        for junk in ["generation_config.json"]:
            if os.path.exists(os.path.join(d, junk)):
                os.remove(os.path.join(d, junk))

        golden = {}
        worst_ref = 0.0
        with torch.no_grad():
            for pi, n in enumerate(PROMPT_LENS):
                for attempt in range(50):
                    ids = torch.randint(0, 256, (n,), generator=gen)
                    logits = model(ids[None], use_cache=False).logits[0].float()
                    hidden = model.model(ids[None], use_cache=False).last_hidden_state[0].float()
                    cur = ids.clone()
                    greedy = []
                    margin = float("inf")  # smallest top-1 minus top-2 logit of the continuation
                    for _ in range(GREEDY_STEPS):
                        last = model(cur[None], use_cache=False).logits[0, -1]
                        top2 = last.topk(2).values
                        margin = min(margin, (top2[0] - top2[1]).item())
                        nxt = int(last.argmax())
                        greedy.append(nxt)
                        cur = torch.cat([cur, torch.tensor([nxt])])
                    # Top-k boundary gaps over the prompt, the continuation and the MTP layer.
                    ref.min_gap = float("inf")
                    rlog, _ = ref.forward(ids)
                    ref.forward(cur[:-1])
                    mtp_logits = ref.mtp(ids, hidden)
                    if ref.min_gap > 1e-4 and margin > 1e-3:
                        break
                print(f"   prompt {pi}: {n} tokens, attempt {attempt}, min top-k gap {ref.min_gap:.2e}, "
                      f"min greedy margin {margin:.2e}")
                err = ((rlog - logits).norm() / logits.norm()).item()
                worst_ref = max(worst_ref, err)
                golden[f"prompt_{pi}"] = ids.to(torch.int32)
                golden[f"logits_{pi}"] = logits.contiguous()
                golden[f"hidden_{pi}"] = hidden.contiguous()
                golden[f"greedy_{pi}"] = torch.tensor(greedy, dtype=torch.int32)
                golden[f"mtp_logits_{pi}"] = mtp_logits.contiguous()
        save_file(golden, os.path.join(d, "golden.safetensors"))
        status = "ok" if worst_ref < 1e-4 else "MISMATCH"
        summary.append((name, worst_ref, status))
        print(f"   reference vs transformers: max rel err {worst_ref:.2e} [{status}]")
    print("\nmodel            ref-vs-HF rel err  status")
    for name, e, s in summary:
        print(f"{name:16s} {e:18.2e}  {s}")
    if any(s != "ok" for _, _, s in summary):
        sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Baseline for the CUDA backend's benchmarks: Hugging Face transformers' own GlmMoeDsa modules at
real GLM-5.2 shapes on the GPU (bf16), timed with CUDA events (median of 20, after warm-up).

Prints, per batch size, the MoE block (router, 8 of 256 experts, shared expert), the dense MLP,
and a whole MoE decoder layer (MLA + indexer + MoE, one new token, no cache), with the bytes of
weights they must read and the achieved GB/s against the copy bandwidth measured here.
"""
import statistics

import torch
import transformers
from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as m


def copy_bandwidth():
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    return 2 * x.numel() / (time_ms(lambda: y.copy_(x)) * 1e-3) / 1e9


def time_ms(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    cfg = transformers.GlmMoeDsaConfig(
        vocab_size=154880, hidden_size=6144, intermediate_size=12288, moe_intermediate_size=2048,
        num_hidden_layers=4, num_attention_heads=64, num_key_value_heads=64, q_lora_rank=2048,
        kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256, n_routed_experts=256,
        num_experts_per_tok=8, n_shared_experts=1, first_k_dense_replace=3, n_group=1, topk_group=1,
        routed_scaling_factor=2.5, index_n_heads=32, index_head_dim=128, index_topk=2048,
        rope_parameters={"rope_type": "default", "rope_theta": 8e6}, max_position_embeddings=4096)
    cfg._attn_implementation = "eager"
    bw = copy_bandwidth()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; copy bandwidth {bw:.0f} GB/s")
    with torch.device("cuda"), torch.no_grad():
        moe = m.GlmMoeDsaMoE(cfg).eval()
        mlp = m.GlmMoeDsaMLP(cfg).eval()
        for mod in (moe, mlp):
            for p in mod.parameters():
                p.normal_(0, p.shape[-1] ** -0.5)
        D, I = 6144, 2048
        expert_bytes = 3 * D * I * 2
        print(f"{'module':10s} {'batch':>5s} {'ms':>9s} {'GB read':>8s} {'GB/s':>8s} {'%copy':>6s}")
        for B in (1, 8, 32, 128):
            x = torch.randn(B, 1, D)
            with torch.no_grad():
                out = moe.gate(x.view(-1, D))  # transformers 5.17: (logits, weights, indices)
                idx = out[-1] if isinstance(out, tuple) else moe.route_tokens_to_experts(out)[0]
            used = len(torch.unique(idx))
            gb = (used * expert_bytes + expert_bytes + 256 * D * 4) / 1e9
            ms = time_ms(lambda: moe(x))
            print(f"{'moe':10s} {B:5d} {ms:9.3f} {gb:8.3f} {gb / ms * 1e3:8.0f} {100 * gb / ms * 1e3 / bw:5.1f}%")
            gb = 3 * D * 12288 * 2 / 1e9
            ms = time_ms(lambda: mlp(x))
            print(f"{'dense mlp':10s} {B:5d} {ms:9.3f} {gb:8.3f} {gb / ms * 1e3:8.0f} {100 * gb / ms * 1e3 / bw:5.1f}%")
        del mlp
        try:
            layer = m.GlmMoeDsaDecoderLayer(cfg, layer_idx=3).eval()
            for p in layer.parameters():
                p.normal_(0, p.shape[-1] ** -0.5 if p.dim() > 1 else 0.1)
            rot = m.GlmMoeDsaRotaryEmbedding(cfg)
            for B in (1, 8):
                x = torch.randn(B, 1, D)
                pos = torch.zeros(B, 1, dtype=torch.long)
                pe = rot(x, pos)
                mask = torch.zeros(B, 1, 1, 1)
                ms = time_ms(lambda: layer(x, attention_mask=mask, position_ids=pos, position_embeddings=pe))
                print(f"{'moe layer':10s} {B:5d} {ms:9.3f}   (MLA + indexer + MoE, one token, no cache)")
        except Exception as e:  # the layer's call signature moves between versions
            print(f"whole decoder layer not timed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()

"""Writes the trained model in the Hugging Face Hub layout Tandem and transformers read."""
import json
import os

import torch

from .data import EOS_TOKENS, SPECIAL_TOKENS


def hf_config(cfg, tok_vocab_size, eos_ids, pad_id):
    return {
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
        "vocab_size": tok_vocab_size, "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_hidden_layers, "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_attention_heads, "q_lora_rank": cfg.q_lora_rank,
        "kv_lora_rank": cfg.kv_lora_rank, "qk_nope_head_dim": cfg.qk_nope_head_dim,
        "qk_rope_head_dim": cfg.qk_rope_head_dim, "qk_head_dim": cfg.qk_nope_head_dim + cfg.qk_rope_head_dim,
        "v_head_dim": cfg.v_head_dim, "head_dim": cfg.qk_rope_head_dim,
        "n_routed_experts": cfg.n_routed_experts, "num_experts_per_tok": cfg.num_experts_per_tok,
        "n_shared_experts": cfg.n_shared_experts, "moe_intermediate_size": cfg.moe_intermediate_size,
        "intermediate_size": cfg.intermediate_size, "first_k_dense_replace": cfg.first_k_dense_replace,
        "mlp_layer_types": cfg.mlp_layer_types, "n_group": 1, "topk_group": 1, "norm_topk_prob": True,
        "routed_scaling_factor": cfg.routed_scaling_factor, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
        "index_n_heads": cfg.index_n_heads, "index_head_dim": cfg.index_head_dim, "index_topk": cfg.index_topk,
        "index_topk_freq": cfg.index_topk_freq, "index_skip_topk_offset": cfg.index_skip_topk_offset,
        "indexer_types": cfg.indexer_types, "index_share_for_mtp_iteration": False,
        "rope_parameters": {"rope_theta": cfg.rope_theta, "rope_type": "default"},
        "rope_interleave": True, "indexer_rope_interleave": True,
        "rms_norm_eps": cfg.rms_norm_eps, "max_position_embeddings": cfg.max_position_embeddings,
        "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "hidden_act": "silu",
        "attention_bias": False, "eos_token_id": eos_ids, "pad_token_id": pad_id, "dtype": "bfloat16",
    }


def hf_state_dict(model):
    """Checkpoint names: stacked experts split per expert, the MTP layer at model.layers.{L}."""
    cfg = model.cfg
    L = cfg.num_hidden_layers
    out = {}
    for name, t in model.state_dict().items():
        t = t.detach().float().cpu()
        if name.startswith("mtp."):
            rest = name[len("mtp."):]
            name = f"model.layers.{L}." + (rest[len("layer."):] if rest.startswith("layer.") else rest)
        for kind in ("gate", "up", "down"):
            key = f".mlp.experts_{kind}"
            if name.endswith(key):
                base = name[: -len(key)]
                for e in range(t.shape[0]):
                    out[f"{base}.mlp.experts.{e}.{kind}_proj.weight"] = t[e].clone()
                break
        else:
            out[name] = t
    return out


def round_to_bf16(model):
    """The stored checkpoint is bf16: make the in-memory weights exactly what will be stored."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(p.to(torch.bfloat16).float())


def write_model(model, tok, out_dir, chat_template):
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    eos = [tok.token_to_id(t) for t in EOS_TOKENS]
    cfg = hf_config(model.cfg, tok.get_vocab_size(), eos, eos[0])
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"), indent=2)
    sd = hf_state_dict(model)
    store = {k: (v if k.endswith("e_score_correction_bias") else v.to(torch.bfloat16)).contiguous() for k, v in sd.items()}
    save_file(store, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    tc = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|endoftext|>",
          "pad_token": "<|endoftext|>", "clean_up_tokenization_spaces": False, "model_max_length": 4096,
          "additional_special_tokens": SPECIAL_TOKENS[1:], "chat_template": chat_template}
    json.dump(tc, open(os.path.join(out_dir, "tokenizer_config.json"), "w"), indent=2)
    return cfg

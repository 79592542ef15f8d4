#!/usr/bin/env python3
"""Independent count of speculative acceptance for the shipped model, in the training framework.

Loads models/tandem-austen into python/austen/model.py (plain torch, fp32), then simulates
greedy MTP speculation with S draft steps on the given prompts exactly as the engine runs it
(austen/evaluate.py), and prints the accept length. Needs only torch (no safetensors package).

  python3 python/austen_accept.py MODEL_DIR PROMPT_IDS.json [--steps 3] [--new 96]
"""
import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from austen.evaluate import accept_length  # noqa: E402
from austen.model import Config, GlmMoeDsa  # noqa: E402


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        s, t = e["data_offsets"]
        buf = bytearray(raw[8 + n + s:8 + n + t])
        out[name] = torch.frombuffer(buf, dtype=dtypes[e["dtype"]]).reshape(e["shape"]).float()
    return out


def load(model_dir):
    cfg_json = json.load(open(os.path.join(model_dir, "config.json")))
    keys = {f for f in Config.__dataclass_fields__}
    cfg = Config(**{k: v for k, v in cfg_json.items() if k in keys},
                 rope_theta=cfg_json["rope_parameters"]["rope_theta"])
    model = GlmMoeDsa(cfg)
    sd = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    L = cfg.num_hidden_layers
    own = {}
    for name, t in sd.items():
        if name.startswith(f"model.layers.{L}."):
            rest = name[len(f"model.layers.{L}."):]
            top = ("enorm", "hnorm", "eh_proj", "shared_head")
            name = "mtp." + (rest if rest.startswith(top) else "layer." + rest)
        own[name] = t
    state = model.state_dict()
    for key in state:
        for kind in ("gate", "up", "down"):
            if key.endswith(f".mlp.experts_{kind}"):
                base = key[: -len(f".mlp.experts_{kind}")]
                E = state[key].shape[0]
                own[key] = torch.stack([own.pop(f"{base}.mlp.experts.{e}.{kind}_proj.weight") for e in range(E)])
    missing = set(state) - set(own)
    assert not missing, f"missing {sorted(missing)[:5]}"
    model.load_state_dict(own, strict=True)
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--new", type=int, default=96)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    model = load(args.model)
    prompts = json.load(open(args.prompts))
    lens = {len(p) for p in prompts}
    assert len(lens) == 1, "prompts must share a length (they are batched)"
    acc, per_pos, rounds = accept_length(model, torch.tensor(prompts), args.new, args.steps)
    print(json.dumps({"accept_length": round(acc, 4), "per_position": [round(x, 4) for x in per_pos],
                      "rounds": rounds, "steps": args.steps, "new_tokens": args.new, "prompts": len(prompts)}))


if __name__ == "__main__":
    main()

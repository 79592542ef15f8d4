"""Quantized tensors made by outside tooling, for Tandem's CPU tests (tests/unit/quant_oracle_test.cpp).

Runs on the GPU machine (torch, transformers): python3 scripts/quant_oracle/make_goldens.py OUT.safetensors

- torch's float32 -> float8_e4m3fn conversion (saturated first, as every quantizer clamps);
- FP8 128 x 128 block quantization by transformers' fine-grained FP8 quantizer where it can be
  called, else by its algorithm written out here (scale = 448 / amax, clamp, to e4m3;
  weight_scale_inv = 1 / scale), with the dequantized values torch computes from them;
- the DeepSeek reference's act_quant rule for activations (s = max(amax, 1e-4) / 448, optional
  ue8m0 rounding), through torch's conversion;
- OCP MXFP4 in Quark's layout (e2m1 codes, low nibble first; e8m0 scale per 32), by an
  independent implementation in torch, for weights (codes + scales + dequantized values) and as a
  quantize-dequantize of activations.
"""
import sys

import torch
from safetensors.torch import save_file

torch.manual_seed(20261201)
out = {}
source = {}

# --- e4m3 conversion ---------------------------------------------------------------------------
vals = torch.cat([
    torch.randn(4096) * 100,
    torch.randn(1024) * 0.01,  # subnormals
    torch.tensor([448.0, 464.0, 480.0, 1000.0, -1000.0, 0.0, -0.0, 2**-9, 2**-10, 3 * 2**-11,
                  1.0625, 1.1875, -1.0625, 240.0, 232.0, 248.0]),  # ties, saturation
]).float()
out["e4m3_in"] = vals
out["e4m3_codes"] = vals.clamp(-448, 448).to(torch.float8_e4m3fn)

# --- FP8 block weights ------------------------------------------------------------------------
w = (torch.randn(256, 384) * torch.linspace(0.01, 2.0, 384)).float()


def fp8_block_written_out(param, bm=128, bn=128):
    rows, cols = param.shape
    p = param.reshape(rows // bm, bm, cols // bn, bn).permute(0, 2, 1, 3)
    max_abs = p.abs().amax(dim=(-1, -2))
    scale = 448.0 / max_abs
    q = (p * scale[..., None, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.permute(0, 2, 1, 3).reshape(rows, cols), scale.reciprocal()


q, s = None, None
try:  # transformers' own quantizer, where its entry point is found
    from transformers.integrations import finegrained_fp8 as fg
    for name in dir(fg):
        fn = getattr(fg, name)
        if callable(fn) and "quant" in name.lower() and "weight" in name.lower():
            try:
                r = fn(w.clone(), [128, 128])
                if isinstance(r, tuple) and r[0].dtype == torch.float8_e4m3fn:
                    q, s = r[0], r[1].float()
                    source["fp8_block"] = "transformers.integrations.finegrained_fp8." + name
                    break
            except Exception:
                pass
except Exception:
    pass
if q is None:
    q, s = fp8_block_written_out(w)
    source["fp8_block"] = "transformers' algorithm written out (no callable entry point found)"
out["fp8blk_in"] = w
out["fp8blk_codes"] = q.contiguous()
out["fp8blk_scale_inv"] = s.reshape(2, 3).contiguous()
out["fp8blk_deq"] = (q.float().reshape(2, 128, 3, 128) * s.reshape(2, 1, 3, 1)).reshape(256, 384)

# --- FP8 activations (act_quant) ---------------------------------------------------------------
x = (torch.randn(5, 512) * torch.tensor([0.001, 1.0, 30.0, 1.0, 500.0])[:, None]).float()
x[3, 128:256] = 0.0  # an all-zero group: the 1e-4 floor
out["fp8act_in"] = x
for ue8m0 in (False, True):
    g = x.reshape(5, 4, 128)
    sc = g.abs().amax(-1).clamp(min=1e-4) / 448.0
    if ue8m0:
        sc = torch.pow(2.0, torch.ceil(torch.log2(sc)))
    codes = (g / sc[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).reshape(5, 512)
    tag = "ue8m0" if ue8m0 else "plain"
    out[f"fp8act_{tag}_codes"] = codes
    out[f"fp8act_{tag}_scale"] = sc.contiguous()

# --- OCP MXFP4 (independent implementation) ----------------------------------------------------
GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_codes(v):
    """Nearest e2m1 code, ties to the even code, saturating at 6."""
    a = v.abs().clamp(max=6.0)
    d = (a[..., None] - GRID).abs()
    best = d.argmin(-1)
    # argmin takes the first of two equal distances: the lower code; fix ties toward even codes
    lo = best
    hi = (best + 1).clamp(max=7)
    tie = (d.gather(-1, hi[..., None]).squeeze(-1) == d.gather(-1, lo[..., None]).squeeze(-1)) & (hi != lo)
    best = torch.where(tie & (lo % 2 == 1), hi, lo)
    sign = ((v < 0) & (best != 0)).to(torch.int64) * 8
    return best + sign


def mx_scale_exp(amax):
    """OCP MX: floor(log2(amax)) - 2 (e2m1's largest exponent); 0 for an all-zero group."""
    e = torch.floor(torch.log2(amax))
    return torch.where(amax > 0, e - 2, torch.zeros_like(e))


def mxfp4(x):
    rows, cols = x.shape
    g = x.reshape(rows, cols // 32, 32)
    e = mx_scale_exp(g.abs().amax(-1))
    codes = e2m1_codes(g / torch.pow(2.0, e)[..., None]).reshape(rows, cols)
    vals = GRID[codes % 8] * torch.where(codes >= 8, -1.0, 1.0)
    deq = (vals.reshape(rows, cols // 32, 32) * torch.pow(2.0, e)[..., None]).reshape(rows, cols)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)  # low nibble first
    return packed, (e + 127).to(torch.uint8), deq.float()


mw = (torch.randn(64, 256) * 0.05).float()
mw[5, 32:64] = 0.0
packed, sc, deq = mxfp4(mw)
out["mx_in"] = mw
out["mx_codes"] = packed
out["mx_scale"] = sc
out["mx_deq"] = deq
ma = (torch.randn(8, 256) * torch.linspace(0.1, 20.0, 8)[:, None]).float()
out["mxact_in"] = ma
out["mxact_qdq"] = mxfp4(ma)[2]

save_file({k: v.contiguous() for k, v in out.items()}, sys.argv[1],
          metadata={"torch": torch.__version__, **source})
print("wrote", sys.argv[1], "torch", torch.__version__, source)

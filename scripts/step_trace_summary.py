#!/usr/bin/env python3
"""Where an engine's wall time went, from a step trace (TANDEM_STEP_TRACE=FILE; runtime/step_trace.h).

Per 1,000 decoded tokens: prefill and decode steps and the engine thread's busy milliseconds in
each, the milliseconds it sat idle between steps, the mean decode batch and how many prompts a
prefill step carried. Two runs of one workload (through HTTP and in-process, say) that differ in
throughput differ in one of these columns.

Usage: scripts/step_trace_summary.py TRACE [TRACE...]
       (as a module: summarize(parse(lines), windows), windows a list of (start, end) Unix seconds)
"""
import sys


def parse(lines):
    steps = []
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        steps.append({"t": int(f[0]) * 1e-6, "kind": f[1], "prefill_seqs": int(f[2]),
                      "prefill_tokens": int(f[3]), "decode_seqs": int(f[4]), "waiting": int(f[5]),
                      "running": int(f[6]), "busy": int(f[7]) * 1e-6})
    return steps


def summarize(steps, windows=None):
    """Totals over the steps that start inside one of the windows (all steps when None)."""
    if windows:
        steps = [s for s in steps if any(a <= s["t"] < b for a, b in windows)]
    steps.sort(key=lambda s: s["t"])
    if not steps:
        return {}
    decode = [s for s in steps if s["kind"] == "decode"]
    prefill = [s for s in steps if s["kind"] == "prefill"]
    # A decoded token per decoding sequence in a decode step or a mixed prefill step, plus the first
    # token of each prompt (counted where its prefill step ran).
    tokens = sum(s["decode_seqs"] for s in steps) + sum(s["prefill_seqs"] for s in prefill)
    idle = 0.0
    for a, b in zip(steps, steps[1:]):
        gap = b["t"] - (a["t"] + a["busy"])
        # Gaps between the windows of separate runs are not part of either.
        if gap > 0 and (not windows or any(w0 <= a["t"] and b["t"] < w1 for w0, w1 in windows)):
            idle += gap
    k = 1000.0 / max(tokens, 1)
    return {
        "tokens": tokens,
        "prefill_steps_per_ktok": len(prefill) * k,
        "decode_steps_per_ktok": len(decode) * k,
        "prefill_ms_per_ktok": 1e3 * sum(s["busy"] for s in prefill) * k,
        "decode_ms_per_ktok": 1e3 * sum(s["busy"] for s in decode) * k,
        "idle_ms_per_ktok": 1e3 * idle * k,
        "mean_decode_batch": sum(s["decode_seqs"] for s in decode) / max(len(decode), 1),
        "prompts_per_prefill": sum(s["prefill_seqs"] for s in prefill) / max(len(prefill), 1),
        "prefill_step_ms": 1e3 * sum(s["busy"] for s in prefill) / max(len(prefill), 1),
        "decode_step_us": 1e6 * sum(s["busy"] for s in decode) / max(len(decode), 1),
    }


HEADER = (f"{'prefill st':>10} {'decode st':>9} {'prefill ms':>10} {'decode ms':>9} {'idle ms':>8} "
          f"{'total ms':>8} | {'batch':>6} {'prompts/pf':>10} {'pf step ms':>10} {'dec step us':>11}")


def row(s):
    if not s.get("tokens"):
        return "(no steps)"
    total = s["prefill_ms_per_ktok"] + s["decode_ms_per_ktok"] + s["idle_ms_per_ktok"]
    return (f"{s['prefill_steps_per_ktok']:>10.2f} {s['decode_steps_per_ktok']:>9.2f} "
            f"{s['prefill_ms_per_ktok']:>10.2f} {s['decode_ms_per_ktok']:>9.2f} "
            f"{s['idle_ms_per_ktok']:>8.2f} {total:>8.2f} | {s['mean_decode_batch']:>6.2f} "
            f"{s['prompts_per_prefill']:>10.2f} {s['prefill_step_ms']:>10.3f} "
            f"{s['decode_step_us']:>11.1f}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("per 1,000 decoded tokens: steps, busy ms by step kind, idle ms between steps")
    print(f"{'trace':<28} " + HEADER)
    for path in sys.argv[1:]:
        with open(path) as f:
            print(f"{path[-28:]:<28} " + row(summarize(parse(f))))


if __name__ == "__main__":
    main()

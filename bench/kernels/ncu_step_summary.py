#!/usr/bin/env python3
"""Sums `ncu --csv --metrics gpu__time_duration.sum` output of one profiled decode step
(kernel_bench --profile-step) per kernel, largest first: what a layer's kernels cost on their
own, without launch gaps. Usage: ncu_step_summary.py ncu.csv [title]"""
import csv
import re
import sys
from collections import OrderedDict


def short(name: str) -> str:
    name = re.sub(r"\(.*", "", name)                      # drop the parameter list
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"tandem::cuda::k::(\(anonymous namespace\)::)?", "", name)
    return name[:60]


def main() -> None:
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        us = v / 1e3 if unit.startswith("n") else v if unit.startswith("u") else v * 1e3
        rows.append((short(r["Kernel Name"]), us))
    total = sum(us for _, us in rows)
    per = OrderedDict()
    for n, us in rows:
        c, t = per.get(n, (0, 0.0))
        per[n] = (c + 1, t + us)
    title = sys.argv[2] if len(sys.argv) > 2 else ""
    print(f"{title}: {len(rows)} kernels, {total:.1f} us of kernel time")
    for n, (c, t) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"  {t:8.1f} us  {c:3d}x  {n}")


if __name__ == "__main__":
    main()

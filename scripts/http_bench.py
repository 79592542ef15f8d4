#!/usr/bin/env python3
"""What the HTTP/SSE path costs: `tandem bench` through a real server against `tandem bench-offline`
(the engine in-process) on the same workload, at each concurrency (issue #21: at least 95%).

For each concurrency c the workload is max(8, 4c) requests of --input-len random token ids (sent as
ids, --tokenize-prompt, so the server prefills exactly as many tokens as bench-offline) and
exactly --output-len new tokens (ignore_eos), closed-loop at c in flight, plain decoding unless
--serve-args/--offline-args say otherwise. The server is started once; each backend's run at each
concurrency runs once untimed (it captures CUDA graphs and warms the allocator, as
bench-offline's untimed pass does), then --repeats times, the median kept (bench-offline likewise
runs --repeats engines), and the prefix cache is flushed before
each (bench-offline empties it between its passes too). Beside each HTTP row it prints where the
CPU went (ms per 1,000 tokens: the engine thread, HTTP workers, the stream pump threads, the
rest of the server, the client) and
the engine's own step rate and tokens per step from /metrics, so a gap can be told apart: fewer
tokens per step = requests waiting on the client or the server between steps; fewer steps per
second = the engine thread slowed down. A second table splits the engine thread's time per step
by phase of its loop (tandem:engine_loop_seconds_total; bench-offline --loop-phases) for both
paths, over every step and over decode steps alone, with the number of steps (more steps than
in-process for the same tokens = prefills split into more, smaller steps), so a slower step
shows where it is slower.

Usage (GPU machine, binaries from scripts/gpu_suite.sh --stage):
  scripts/http_bench.py --tandem build-cuda/carry/tandem --device cuda
Works on the CPU as well (slowly): --device cpu --concurrency 1,8 --output-len 64.
"""
import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def thread_cpu(pid):
    """CPU seconds per thread name of a process (utime + stime of every thread)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def metric(base, name):
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    m = re.search(r"^" + re.escape(name) + r"(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


LOOP_PHASES = ["wait", "schedule", "prepare", "device", "commit", "send", "publish"]


def loop_seconds(base, family="tandem:engine_loop_seconds_total"):
    """The engine thread's cumulative seconds by loop phase (all steps, or decode steps)."""
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        "^" + re.escape(family) + r'\{[^}]*phase="(\w+)"[^}]*\} ([0-9.e+-]+)$', text, re.M)}


def median_row(rows):
    """The run of median throughput (its other columns kept with it)."""
    return sorted(rows, key=lambda r: r["tok_s"])[len(rows) // 2]


def offline(args, c, n):
    """bench-offline at concurrency c, --repeats engines (each with its untimed pass); the median."""
    env = dict(os.environ)
    if args.step_trace:
        env["TANDEM_STEP_TRACE"] = os.path.join(args.step_trace, f"offline_c{c}.trace")
    cmd = [args.tandem, "bench-offline", "--device", args.device, "--speculative-num-steps", "0",
           "--concurrency", ",".join([str(c)] * args.repeats), "--num-prompts", str(n),
           "--prompt-tokens", str(args.input_len), "--max-new-tokens", str(args.output_len),
           "--loop-phases"] + args.offline_args.split()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if out.returncode != 0:
        sys.exit(f"bench-offline failed:\n{out.stdout}\n{out.stderr}")
    rows = []
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] == str(c) and f[1] == "plain":
            rows.append({"tok_s": float(f[2]), "tpot_ms": float(f[3]), "ttft_ms": float(f[4])})
        elif rows and line.strip().startswith(("loop, us per step:", "decode loop, us")):
            key = "loop_us" if line.strip().startswith("loop") else "decode_loop_us"
            rows[-1][key] = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+)", line)
                             if k in LOOP_PHASES}
            n = re.search(r"\((\d+) steps\)", line)
            rows[-1][key]["steps"] = float(n.group(1)) if n else 0.0
    if len(rows) != args.repeats:
        sys.exit(f"expected {args.repeats} plain rows in bench-offline's output:\n{out.stdout}")
    return median_row(rows)


def online(args, base, server_pid, backend, c, n):
    results, windows = [], []  # windows: the timed runs' (start, end), for the step trace
    for attempt in range(1 + args.repeats):  # the first run warms up; the median of the rest
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as tf:
            path = tf.name
        nice = ["nice", "-n", str(args.client_nice)] if args.client_nice else []
        cmd = nice + [args.tandem, "bench", "--base-url", base, "--backend", backend,
               "--dataset-name", "random-ids", "--tokenize-prompt",
               "--random-input-len", str(args.input_len),
               "--random-output-len", str(args.output_len), "--random-range-ratio", "1",
               "--num-prompts", str(n), "--max-concurrency", str(c), "--disable-tqdm",
               "--seed", str(attempt + 1), "--flush-cache", "--output-file", path]
        steps0 = metric(base, "tandem:forward_steps_total")
        toks0 = metric(base, "sglang:generation_tokens_total")
        loop0 = loop_seconds(base)
        dloop0 = loop_seconds(base, "tandem:engine_decode_loop_seconds_total")
        dsteps0 = metric(base, "tandem:engine_decode_steps_total")
        cpu0 = thread_cpu(server_pid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        t1 = time.time()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu1 = thread_cpu(server_pid)
        loop1 = loop_seconds(base)
        dloop1 = loop_seconds(base, "tandem:engine_decode_loop_seconds_total")
        dsteps = metric(base, "tandem:engine_decode_steps_total") - dsteps0
        steps = metric(base, "tandem:forward_steps_total") - steps0
        toks = metric(base, "sglang:generation_tokens_total") - toks0
        if out.returncode != 0:
            sys.exit(f"tandem bench failed:\n{out.stdout}\n{out.stderr}")
        with open(path) as f:
            j = json.loads(f.read().splitlines()[-1])
        os.unlink(path)
        if j.get("completed") != n:
            sys.exit(f"tandem bench: {j.get('completed')} of {n} requests completed")
        groups = {"engine": 0.0, "http-worker": 0.0, "http-stream": 0.0, "other": 0.0}
        for name in set(cpu0) | set(cpu1):
            d = cpu1.get(name, 0.0) - cpu0.get(name, 0.0)
            key = ("engine" if name == "tandem-engine" else
                   "http-stream" if name.startswith("http-stream") else
                   name if name in groups else "other")
            groups[key] += d
        client = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        per_k = 1000.0 / max(toks, 1.0)
        result = {
            "tok_s": j["output_throughput"], "tpot_ms": j["mean_tpot_ms"],
            "ttft_ms": j["mean_ttft_ms"], "duration": j["duration"],
            "steps_s": steps / j["duration"], "tok_per_step": toks / max(steps, 1.0),
            "cpu_ms_per_ktok": {k: 1000.0 * v * per_k for k, v in groups.items()},
            "client_ms_per_ktok": 1000.0 * client * per_k,
            # The wait phase also spans the client's start-up and the cache flush before it.
            "loop_us": {k: 1e6 * (loop1.get(k, 0.0) - loop0.get(k, 0.0)) / max(steps, 1.0)
                        for k in LOOP_PHASES},
            "decode_loop_us": {k: 1e6 * (dloop1.get(k, 0.0) - dloop0.get(k, 0.0)) /
                               max(dsteps, 1.0) for k in LOOP_PHASES},
        }
        result["loop_us"]["steps"] = steps
        result["decode_loop_us"]["steps"] = dsteps
        if attempt > 0:
            results.append(result)
            # The timed run only: the client's test request, cache flush and 1 s pause before it
            # are not part of it (the client exits within a few milliseconds of its end).
            windows.append((max(t0, t1 - j["duration"] - 0.3), t1))
    row = median_row(results)
    row["windows"] = windows
    return row


def pin_engine(pid):
    """An experiment: the server's engine thread alone on the last allowed CPU, every other
    thread of the server and of this script (so the clients too) on the rest."""
    cpus = sorted(os.sched_getaffinity(0))
    engine_cpu, rest = {cpus[-1]}, set(cpus[:-1])
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            name = f.read().strip()
        os.sched_setaffinity(int(tid), engine_cpu if name == "tandem-engine" else rest)
    os.sched_setaffinity(0, rest)
    print(f"pinned: the engine thread on CPU {cpus[-1]}, everything else on {len(rest)} CPUs",
          file=sys.stderr)


def print_loop(label, c, loop):
    if not loop:
        return
    busy = sum(v for k, v in loop.items() if k in LOOP_PHASES and k != "wait")
    print(f"{c:>4} {label:<9} " + " ".join(f"{loop.get(k, 0.0):>8.1f}" for k in LOOP_PHASES) +
          f" {busy:>8.1f} {loop.get('steps', 0.0):>7.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", default="build/tandem")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--backends", default="sglang,openai")
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=512)
    ap.add_argument("--serve-args", default="", help="extra `tandem serve` arguments")
    ap.add_argument("--offline-args", default="", help="extra `tandem bench-offline` arguments")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--client-nice", type=int, default=0,
                    help="run tandem bench at this niceness (an experiment: a client on the same "
                         "host competes with the engine thread for cores)")
    ap.add_argument("--server-env", default="", help="VAR=VALUE ... for the server")
    ap.add_argument("--pin-engine", action="store_true",
                    help="an experiment: the engine thread alone on one CPU (threads created "
                         "later, such as stream pumps, inherit the rest)")
    ap.add_argument("--step-trace", default="",
                    help="a folder: trace every engine step of the server and of bench-offline "
                         "there (TANDEM_STEP_TRACE) and print where each path's time went")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed runs per row (after one untimed); the median is printed")
    args = ap.parse_args()
    concs = [int(x) for x in args.concurrency.split(",")]
    backends = args.backends.split(",")
    if args.step_trace:
        os.makedirs(args.step_trace, exist_ok=True)

    rows_off = {c: offline(args, c, max(8, 4 * c)) for c in concs}

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="http_bench_server_", suffix=".log", delete=False)
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in args.server_env.split())
    if args.step_trace:
        env["TANDEM_STEP_TRACE"] = os.path.join(args.step_trace, "serve.trace")
    server = subprocess.Popen([args.tandem, "serve", "--device", args.device, "--host", "127.0.0.1",
                               "--port", str(port)] + args.serve_args.split(),
                              stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    sys.exit(f"the server exited ({server.returncode}); log: {log.name}")
                time.sleep(0.5)
        if args.pin_engine:
            pin_engine(server.pid)
        rows_on = {(b, c): online(args, base, server.pid, b, c, max(8, 4 * c))
                   for b in backends for c in concs}
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()

    print(f"HTTP vs in-process, {args.device}: {args.input_len} prompt tokens, {args.output_len} new "
          f"tokens, max(8, 4c) requests, plain decoding unless flags say otherwise")
    print(f"{'conc':>4} {'path':<9} {'tok/s':>9} {'ratio':>6} {'TPOT ms':>8} {'TTFT ms':>8} "
          f"{'steps/s':>8} {'tok/step':>8} | CPU ms per 1k tokens: {'engine':>6} {'workers':>7} "
          f"{'stream':>6} {'other':>5} {'client':>6}")
    for c in concs:
        o = rows_off[c]
        print(f"{c:>4} {'offline':<9} {o['tok_s']:>9.1f} {'1.000':>6} {o['tpot_ms']:>8.3f} "
              f"{o['ttft_ms']:>8.1f}")
        for b in backends:
            r = rows_on[(b, c)]
            cpu = r["cpu_ms_per_ktok"]
            print(f"{c:>4} {b:<9} {r['tok_s']:>9.1f} {r['tok_s'] / o['tok_s']:>6.3f} "
                  f"{r['tpot_ms']:>8.3f} {r['ttft_ms']:>8.1f} {r['steps_s']:>8.1f} "
                  f"{r['tok_per_step']:>8.2f} |                       {cpu['engine']:>6.1f} "
                  f"{cpu['http-worker']:>7.1f} {cpu['http-stream']:>6.1f} {cpu['other']:>5.1f} "
                  f"{r['client_ms_per_ktok']:>6.1f}")
    print(f"(goal: HTTP at least 0.95 of in-process at every concurrency; the median of "
          f"{args.repeats} timed runs; server log {log.name})")
    for key, what in (("loop_us", "every step"), ("decode_loop_us", "decode steps only")):
        print(f"the engine thread, microseconds per step by loop phase, {what} (wait includes "
              "idle time between runs):")
        print(f"{'conc':>4} {'path':<9} " + " ".join(f"{k:>8}" for k in LOOP_PHASES) +
              f" {'busy':>8} {'steps':>7}")
        for c in concs:
            print_loop("offline", c, rows_off[c].get(key))
            for b in backends:
                print_loop(b, c, rows_on[(b, c)].get(key))
    if args.step_trace:
        print_step_traces(args, concs, backends, rows_on)


def print_step_traces(args, concs, backends, rows_on):
    """Per 1,000 decoded tokens, from the step traces: bench-offline's whole trace (its untimed
    and timed passes), the server's over the timed runs of each backend."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import step_trace_summary as sts
    with open(os.path.join(args.step_trace, "serve.trace")) as f:
        served = sts.parse(f)
    print("step traces, per 1,000 decoded tokens (scripts/step_trace_summary.py):")
    print(f"{'conc':>4} {'path':<9} " + sts.HEADER)
    for c in concs:
        with open(os.path.join(args.step_trace, f"offline_c{c}.trace")) as f:
            print(f"{c:>4} {'offline':<9} " + sts.row(sts.summarize(sts.parse(f))))
        for b in backends:
            print(f"{c:>4} {b:<9} " + sts.row(sts.summarize(served, rows_on[(b, c)]["windows"])))


if __name__ == "__main__":
    main()

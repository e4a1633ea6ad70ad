#!/usr/bin/python3
"""How fast mapctl's control-plane commands start: `mapctl --version` and `mapctl jobs` against a
running mapd (port 0, a memory store), each the median of --runs, beside the same commands in
mapctl-torch — the CLI as it was before it was split, linking LibTorch — run alongside as the
baseline (docs/cli.md "Two programs").

  bench/cli_startup_bench.py --mapctl build/client/mapctl/mapctl --mapd build/server/mapd [--runs 15]
      [--max-ms 100] [--max-ratio 0.5]

Exit 1 when mapctl's median is over --max-ms (0: no bound), or over --max-ratio of mapctl-torch's
(0: no bound). mapctl-torch is looked for beside mapctl.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

TOKEN = "cli-startup-bench-token"


def median_ms(argv, env, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        times.append((time.perf_counter() - start) * 1e3)
        if r.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr}")
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mapctl", required=True)
    p.add_argument("--mapd", required=True)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--max-ms", type=float, default=0)
    p.add_argument("--max-ratio", type=float, default=0)
    a = p.parse_args()
    torch = os.path.join(os.path.dirname(os.path.abspath(a.mapctl)), "mapctl-torch")
    mapd = subprocess.Popen([a.mapd, "--listen", "127.0.0.1:0", "--metrics-listen", ""], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, MAPD_TOKEN=TOKEN))
    try:
        line = mapd.stdout.readline()
        if "serving on port" not in line:
            sys.exit(f"mapd did not start: {line}{mapd.stderr.read()}")
        port = line.split("serving on port ")[1].split()[0]
        env = dict(os.environ, MAPD_ADDRESS=f"127.0.0.1:{port}", MAPD_TOKEN=TOKEN)
        rows = []
        for name, args in (("--version", ["--version"]), ("jobs", ["jobs"])):
            light = median_ms([a.mapctl, *args], env, a.runs)
            heavy = median_ms([torch, *args], env, a.runs)
            rows.append((name, light, heavy))
    finally:
        mapd.terminate()
        mapd.wait(timeout=20)
    print(f"| command | mapctl (ms, median of {a.runs}) | mapctl-torch (ms) | ratio |")
    print("|---|---|---|---|")
    bad = False
    for name, light, heavy in rows:
        print(f"| mapctl {name} | {light:.1f} | {heavy:.1f} | {light / heavy:.3f} |")
        bad |= a.max_ms > 0 and light > a.max_ms
        bad |= a.max_ratio > 0 and light > a.max_ratio * heavy
    if bad:
        print(f"over the bound: --max-ms {a.max_ms}, --max-ratio {a.max_ratio}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

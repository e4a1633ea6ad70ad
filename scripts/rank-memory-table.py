#!/usr/bin/python3
"""Per-rank peak memory of multi-rank runs, measured against the prediction (docs/runtime.md).

Usage: scripts/rank-memory-table.py [path/to/mapctl]   (default build/client/mapctl/mapctl)

Runs `mapctl run MODEL --ranks 4 ... --check-reference -o json` for the test models under data
parallelism, Megatron tensor parallelism and MAP's plan on a 2x2 mesh, and prints a markdown
table: the worst rank's measured peak, the prediction from profiling that rank's program, their
difference, and the largest relative loss difference against one process.
"""
import json
import subprocess
import sys

MAPCTL = sys.argv[1] if len(sys.argv) > 1 else "build/client/mapctl/mapctl"
MODELS = [
    ("tiny GPT", "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"),
    ("tiny LLaMA (GQA)", "llama2-7b:layers=2,hidden=32,heads=4,kv_heads=2,ffn=64,vocab=64,seq=8,batch=4"),
    ("MLP", "mlp:in=16,hidden=32,layers=2,out=8,batch=8"),
]
PLANS = [("data parallel", ["--strategy", "dp"]), ("Megatron TP=4", ["--strategy", "tp"]), ("MAP 2x2", ["--mesh", "2x2"])]

print("| model | plan | measured peak (worst rank) | predicted | difference | loss vs one process |")
print("|---|---|---|---|---|---|")
for name, spec in MODELS:
    for plan, flags in PLANS:
        out = subprocess.run([MAPCTL, "run", spec, "--ranks", "4", *flags, "--steps", "10", "--optimizer", "momentum",
                              "--lr", "0.1", "--check-reference", "-o", "json"], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"| {name} | {plan} | error: {out.stderr.strip()[:120]} | | | |")
            continue
        r = json.loads(out.stdout)
        worst = max(r["per_rank"], key=lambda p: abs(p["predicted_peak_bytes"] - p["measured_peak_bytes"]))
        m, p = worst["measured_peak_bytes"], worst["predicted_peak_bytes"]
        print(f"| {name} | {plan} | {m / 1024:.1f} KiB | {p / 1024:.1f} KiB | {100 * (p - m) / m:+.1f}% | "
              f"{r['reference_max_relative_loss_difference']:.1e} |")

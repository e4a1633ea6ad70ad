#!/usr/bin/python3
"""MAP's cost model against Megatron-LM's published runs: every row of Table 1 of Narayanan et
al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC'21) —
GPT models of 1.7B to 1T parameters on 32 to 3072 A100s, measured TFLOP/s per GPU — costed by
`mapctl plan --pin` in the configuration the paper ran, beside the step time it measured.

Usage:
  /usr/bin/python3 scripts/megatron-table.py [--mapctl build/client/mapctl/mapctl] [options]

Options:
  --rows a,b,...     only these rows (by parameters, e.g. 145.6,1008)
  --schedule S       the pipelines' schedule pin: interleaved (default: the paper's, "the
                     interleaved pipeline schedule with the scatter/gather optimization enabled",
                     chunks per device not stated, so searched) or 1f1b
  --markdown FILE    write the table to FILE
  --update-docs      write the table into docs/planner.md (between its megatron markers)
  --check TOL        exit 1 unless every row's predicted / measured step is within 1 ± TOL

Each row is pinned as the paper ran it: tensor, pipeline and data degrees, micro-batch size 1,
every layer recomputed (`--pin tp=T,pp=P,dp=D,mbs=1,recompute=full,schedule=...`), bf16 mixed
precision with Adam, sequence 2048, vocabulary 51,200, 8 A100 80 GB a node. The measured step is
the paper's FLOPs per step — 96·B·s·l·h²·(1 + s/6h + V/16lh), recomputation included — over
(GPUs × the measured TFLOP/s per GPU).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SEQ, VOCAB = 2048, 51200

# Table 1: parameters (billions), attention heads, hidden size, layers, tensor-parallel size,
# pipeline-parallel size, GPUs, global batch, achieved TFLOP/s per GPU.
ROWS = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]


def measured_step(heads, hidden, layers, gpus, batch, tflops):
    flops = 96 * batch * SEQ * layers * hidden**2 * (1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))
    return flops / (gpus * tflops * 1e12)


def plan_row(args, row):
    params, heads, hidden, layers, tp, pp, gpus, batch, tflops = row
    dp = gpus // (tp * pp)
    pins = f"tp={tp},pp={pp},dp={dp},mbs=1,recompute=full"
    if pp > 1:
        pins += f",schedule={args.schedule}"
    model = f"gpt3-175b:layers={layers},hidden={hidden},heads={heads},vocab={VOCAB},seq={SEQ},batch={batch}"
    cmd = [args.mapctl, "plan", model, "--devices", str(gpus), "--device-type", "a100-80g", "--precision", "bf16",
           "--optimizer", "adamw", "--pin", pins, "-o", "json"]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - start
    out = {"params": params, "tp": tp, "pp": pp, "dp": dp, "gpus": gpus, "batch": batch, "pins": pins, "wall": wall,
           "measured": measured_step(heads, hidden, layers, gpus, batch, tflops)}
    if r.returncode != 0:
        out["error"] = next((line for line in r.stderr.splitlines() if line.strip()), f"exit {r.returncode}")
        return out
    j = json.loads(r.stdout)
    pinned = j.get("pinned", "")
    for b in j.get("pipeline_baselines", []) + j.get("baselines", []):
        if b.get("name") == pinned and b.get("applicable", True):
            out["name"] = pinned
            out["predicted"] = b.get("predicted_step_seconds")
            out["fits"] = b.get("fits")
            out["bubble"] = b.get("bubble_fraction")
            out["schedule"] = b.get("schedule", "")
            out["micro_batches"] = b.get("micro_batches")
    if "predicted" not in out:
        out["error"] = f"no pinned configuration in the output (pinned: '{pinned}')"
    out["map"] = j.get("predicted_step_seconds")
    return out


def table(results):
    lines = ["| parameters | GPUs | TP × PP × DP | batch | micro-batches | schedule | measured step | MAP's cost of it | ratio | fits | MAP's plan in the pins |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        head = f"| {r['params']}B | {r['gpus']} | {r['tp']} × {r['pp']} × {r['dp']} | {r['batch']} |"
        if "error" in r:
            lines.append(f"{head} - | - | {r['measured']:.2f} s | error: {r['error']} | - | - | - |")
            continue
        sched = r.get("schedule", "") if r["pp"] > 1 else "none"
        lines.append(f"{head} {r['micro_batches']} | {sched} | {r['measured']:.2f} s | {r['predicted']:.2f} s | "
                     f"{r['predicted'] / r['measured']:.2f} | {'yes' if r['fits'] else 'no'} | {r['map']:.2f} s |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mapctl", default=os.environ.get("MAPCTL", os.path.join(ROOT, "build/client/mapctl/mapctl")))
    p.add_argument("--rows", default="")
    p.add_argument("--schedule", default="interleaved", choices=["interleaved", "1f1b"])
    p.add_argument("--markdown", default="")
    p.add_argument("--update-docs", action="store_true")
    p.add_argument("--check", type=float, default=0)
    args = p.parse_args()
    wanted = {float(x) for x in args.rows.split(",") if x}
    results = []
    for row in ROWS:
        if wanted and row[0] not in wanted:
            continue
        r = plan_row(args, row)
        results.append(r)
        ratio = f"{r['predicted'] / r['measured']:.2f}" if "predicted" in r else r.get("error", "")
        print(f"{r['params']}B: measured {r['measured']:.2f} s, MAP {r.get('predicted', float('nan')):.2f} s, "
              f"ratio {ratio} ({r['wall']:.1f} s)", file=sys.stderr)
    md = table(results)
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md + "\n")
    if args.update_docs:
        path = os.path.join(ROOT, "docs", "planner.md")
        text = open(path).read()
        new, n = re.subn(r"(<!-- megatron:begin -->\n).*?(<!-- megatron:end -->)", lambda m: m.group(1) + md + "\n" + m.group(2),
                         text, flags=re.S)
        if n != 1:
            sys.exit("docs/planner.md has no <!-- megatron:begin --> ... <!-- megatron:end --> block")
        open(path, "w").write(new)
    if args.check > 0:
        bad = [r for r in results if "predicted" not in r or abs(r["predicted"] / r["measured"] - 1) > args.check]
        if bad:
            print(f"{len(bad)} of {len(results)} rows beyond 1 ± {args.check}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

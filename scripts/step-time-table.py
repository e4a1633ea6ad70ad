#!/usr/bin/python3
"""Predicted against measured step time of multi-rank plans on this machine (docs/runtime.md,
"Step time: predicted and measured").

Usage: scripts/step-time-table.py [--device-type auto|cpu|FILE.json] [--steps 40] [--rounds 3] [--model SPEC] [path/to/mapctl]

Runs `mapctl run MODEL --ranks N PLAN --steps S -o json` for one model under plans on 1, 2 and 4
ranks — data parallel, Megatron tensor parallel, MAP's plan on a 2x2 mesh, ZeRO-2, ZeRO-3 and
every block recomputed — with the planner's cost model of `--device-type` (default: none given,
so each command's own default, `auto`: this host as measured once per host and build and cached,
with no calibrate step by the user; `cpu` for the catalogue's nominal figures). For each plan it
prints the slowest rank's predicted step (its program profiled, collectives costed) and the
slowest rank's measured median step (steps after the first), their ratio, and at the end the
Kendall rank correlation between the two orders (1: the planner orders the plans as they run)
and the largest relative error. The plans run `--rounds` times, one after another in turn, and
each plan's measured step is the median of its rounds: this machine's speed drifts by 10-40%
over minutes, and a plan measured only once, in a slow minute, would look mispredicted (with 20
steps and one round, the same plan measured 22.1 and 27.3 ms in runs minutes apart).
Exits 1 when a run fails.
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The bench's nanoGPT size (bench/ddp_bench.py) as a zoo model: vocabulary 512, width 128, 2 layers, 8 x 64 tokens.
MODEL = "gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64,batch=8"
PLANS = [
    ("one process (`mapctl profile --measure`)", 1, []),
    ("data parallel", 2, ["--strategy", "dp"]),
    ("tensor parallel (Megatron)", 2, ["--strategy", "tp"]),
    ("data parallel", 4, ["--strategy", "dp"]),
    ("tensor parallel (Megatron)", 4, ["--strategy", "tp"]),
    ("MAP on 2x2", 4, ["--mesh", "2x2"]),
    ("ZeRO-2", 4, ["--mesh", "4", "--zero", "2"]),
    ("ZeRO-3", 4, ["--mesh", "4", "--zero", "3"]),
    ("data parallel, every block recomputed", 4, ["--strategy", "dp", "--recompute", "all"]),
]


def kendall_tau(xs, ys):
    """Kendall's tau-a over the pairs (ties count as neither concordant nor discordant)."""
    pairs = list(itertools.combinations(range(len(xs)), 2))
    s = sum((xs[i] - xs[j]) * (ys[i] - ys[j]) > 0 for i, j in pairs) - sum((xs[i] - xs[j]) * (ys[i] - ys[j]) < 0 for i, j in pairs)
    return s / len(pairs) if pairs else 1.0


def run_plan(a, ranks, flags):
    """(predicted seconds, predicted communication seconds, measured seconds) of one plan's run."""
    if ranks == 1:  # one process: the profiler's prediction beside real steps
        cmd = [a.mapctl, "profile", a.model, "--measure", "--steps", str(a.steps), "--optimizer", "adamw"]
    else:
        cmd = [a.mapctl, "run", a.model, "--ranks", str(ranks), *flags, "--steps", str(a.steps)]
    if a.device_type:
        cmd += ["--device-type", a.device_type]
    cmd += ["-o", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"{' '.join(cmd)} failed:\n{r.stderr}", file=sys.stderr)
        sys.exit(1)
    out = json.loads(r.stdout)
    if ranks == 1:
        return out["predicted_step_seconds"], 0.0, out["measured_step_seconds"]
    slowest = max(out["per_rank"], key=lambda q: q["predicted_step_seconds"])
    return slowest["predicted_step_seconds"], slowest["predicted_communication_seconds"], max(q["measured_step_seconds"] for q in out["per_rank"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mapctl", nargs="?", default=os.path.join(HERE, "..", "build", "client", "mapctl", "mapctl"))
    ap.add_argument("--device-type", default="", help="default: the commands' own (auto: this host, measured and cached)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3, help="runs of every plan, in turn; the measured step is their median")
    ap.add_argument("--model", default=MODEL)
    a = ap.parse_args()
    print(f"model `{a.model}`, AdamW, {a.steps} steps, {a.rounds} rounds, device type `{a.device_type or 'the default (auto)'}`\n")
    print("| plan | ranks | predicted ms/step (comm) | measured ms/step, median (rounds) | measured / predicted |")
    print("|---|---|---|---|---|")
    predicted, rounds = [], [[] for _ in PLANS]
    for r in range(a.rounds):
        for k, (name, ranks, flags) in enumerate(PLANS):
            p, c, m = run_plan(a, ranks, flags)
            if r == 0:
                predicted.append((p, c))
            rounds[k].append(m)
    measured = [statistics.median(ms) for ms in rounds]
    for (name, ranks, _), (p, c), m, ms in zip(PLANS, predicted, measured, rounds):
        each = " / ".join(f"{x * 1e3:.1f}" for x in ms)
        print(f"| {name} | {ranks} | {p * 1e3:.1f} ({c * 1e3:.1f}) | {m * 1e3:.1f} ({each}) | {m / p:.2f} |", flush=True)
    predicted = [p for p, _ in predicted]
    worst = max(abs(p - m) / m for p, m in zip(predicted, measured))
    print(f"\nKendall tau (predicted vs measured order, {len(PLANS)} plans): {kendall_tau(predicted, measured):.2f}; "
          f"largest error of a prediction: {worst * 100:.0f}% of the measured step")


if __name__ == "__main__":
    main()

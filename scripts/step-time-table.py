#!/usr/bin/python3
"""Predicted against measured step time of multi-rank plans on this machine (docs/runtime.md,
"Step time: predicted and measured").

Usage: scripts/step-time-table.py [--device-type auto|cpu|FILE.json] [--steps 40] [--rounds 3]
                                   [--models gpt,resnet] [--gpt SPEC] [path/to/mapctl]

Runs `mapctl run MODEL --ranks N PLAN --steps S -o json` for the bench's two models (bench/ddp_bench.py:
its nanoGPT, as a zoo spec, and its small ResNet, traced here with this Python's torch, batch norm
over each rank's samples as DDP's) under plans on 1, 2 and 4 ranks — data parallel, Megatron
tensor parallel, MAP's plan on a 2x2 mesh, ZeRO-2, ZeRO-3 and every block recomputed — with the planner's cost model of `--device-type` (default: none given,
so each command's own default, `auto`: this host as measured once per host and build and cached,
with no calibrate step by the user; `cpu` for the catalogue's nominal figures). For each plan it
prints the slowest rank's predicted step (its program profiled, collectives costed) and the
slowest rank's measured median step (steps after the first), their ratio, and at the end the
Kendall rank correlation between the two orders (1: the planner orders the plans as they run)
and the largest relative error, per model and over both. The plans run `--rounds` times, one after another in turn, and
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
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The bench's nanoGPT size (bench/ddp_bench.py) as a zoo model: vocabulary 512, width 128, 2 layers, 8 x 64 tokens.
GPT = "gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64,batch=8"
# Extra flags of each model's runs: the ResNet's batch norm as DDP's (each rank's own samples).
RUN_FLAGS = {"gpt": [], "resnet": ["--batch-norm", "local"]}
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


def resnet_archive(tmp):
    """The bench's ResNet (bench/ddp_bench.py) traced to a TorchScript archive in `tmp`."""
    sys.path.insert(0, os.path.join(HERE, "..", "bench"))
    import ddp_bench  # noqa: E402  (torch is imported only when the ResNet is wanted)
    path = os.path.join(tmp, "resnet.pt")
    ddp_bench.save_archive("resnet", path)
    return path


def run_plan(a, model, extra, ranks, flags):
    """(predicted seconds, predicted communication seconds, measured seconds) of one plan's run."""
    if ranks == 1:  # one process: the profiler's prediction beside real steps
        cmd = [a.mapctl, "profile", model, "--measure", "--steps", str(a.steps), "--optimizer", "adamw"]
    else:
        cmd = [a.mapctl, "run", model, "--ranks", str(ranks), *flags, *extra, "--steps", str(a.steps)]
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


def print_table(title, rows):
    """rows: (plan name, ranks, (predicted, comm), measured median, measured rounds). Returns (predicted, measured) lists."""
    print(f"\n{title}\n")
    print("| plan | ranks | predicted ms/step (comm) | measured ms/step, median (rounds) | measured / predicted |")
    print("|---|---|---|---|---|")
    for name, ranks, (p, c), m, ms in rows:
        each = " / ".join(f"{x * 1e3:.1f}" for x in ms)
        print(f"| {name} | {ranks} | {p * 1e3:.1f} ({c * 1e3:.1f}) | {m * 1e3:.1f} ({each}) | {m / p:.2f} |", flush=True)
    return [p for _, _, (p, _), _, _ in rows], [m for _, _, _, m, _ in rows]


def summary(what, predicted, measured):
    worst = max(abs(p - m) / m for p, m in zip(predicted, measured))
    return (f"{what}: Kendall tau (predicted vs measured order, {len(predicted)} plans) {kendall_tau(predicted, measured):.2f}; "
            f"largest error of a prediction {worst * 100:.0f}% of the measured step")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mapctl", nargs="?", default=os.path.join(HERE, "..", "build", "client", "mapctl", "mapctl"))
    ap.add_argument("--device-type", default="", help="default: the commands' own (auto: this host, measured and cached)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3, help="runs of every plan, in turn; the measured step is their median")
    ap.add_argument("--models", default="gpt,resnet", help="which of the bench's models: gpt, resnet or both")
    ap.add_argument("--gpt", default=GPT, help="the GPT's zoo spec")
    a = ap.parse_args()
    names = [m for m in a.models.split(",") if m]
    if not names or any(m not in RUN_FLAGS for m in names):
        ap.error(f"--models takes gpt, resnet or both (got {a.models!r})")
    print(f"AdamW, {a.steps} steps, {a.rounds} rounds, device type `{a.device_type or 'the default (auto)'}`")
    with tempfile.TemporaryDirectory() as tmp:
        models = {"gpt": a.gpt, "resnet": resnet_archive(tmp) if "resnet" in names else ""}
        runs = [(m, plan) for m in names for plan in PLANS]
        predicted, rounds = {}, {k: [] for k in range(len(runs))}
        for r in range(a.rounds):  # every plan of every model in turn, so that drift hits all alike
            for k, (m, (name, ranks, flags)) in enumerate(runs):
                p, c, t = run_plan(a, models[m], RUN_FLAGS[m], ranks, flags)
                predicted.setdefault(k, (p, c))
                rounds[k].append(t)
    all_p, all_m, lines = [], [], []
    for m in names:
        rows = [(name, ranks, predicted[k], statistics.median(rounds[k]), rounds[k])
                for k, (mm, (name, ranks, _)) in enumerate(runs) if mm == m]
        title = f"model `{a.gpt}`" if m == "gpt" else "model: the bench's ResNet (TinyResNet, width 32, 16 images of 32x32; batch norm local)"
        ps, ms = print_table(title, rows)
        lines.append(summary(m, ps, ms))
        all_p += ps
        all_m += ms
    if len(names) > 1:
        lines.append(summary("both", all_p, all_m))
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()

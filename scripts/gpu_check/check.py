#!/usr/bin/env python3
"""MAP's first GPU check: scripts/gpu-check.sh drives these steps (docs/profiler.md, "The GPU check").

  predict  (here)  MAP's predictions for each case, for the device types named: trace the module,
                   `mapctl plan --devices 1 --pin ...` (micro-batches, recompute, zero 0), and write
                   peak memory and step time to a JSON file that travels to the GPU machine.
  profile  (there) part (a): PyTorch's own training step of each case on the device (peak
                   allocated and reserved memory, step time over warm steps) against the prediction.
  run      (there) part (b): `mapctl run --device DEVICE` of each case MAP's single-device runtime
                   trains, from the same weights and batch as PyTorch: losses step by step, measured
                   peak and step time against the prediction.

Works under PyTorch 1.13 (Debian's, here) and 2.x (the GPU machine's).
"""
import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

WARM_STEPS = 2     # steps before measuring (allocator warm, optimizer states made)
TIMED_STEPS = 3    # steps measured: the median time, the peak over all of them
LOSS_STEPS = 4     # part (b): steps whose losses are compared
LR = 1e-3          # AdamW as MAP's defaults: betas (0.9, 0.999), eps 1e-8, no weight decay
# Part (b) trains under SGD with momentum 0.9 (MAP's `momentum`: torch.optim.SGD, dampening 0):
# AdamW's first steps move every weight by +-lr whatever its gradient's size, so gradients at
# rounding level decide the sign and two correct runs part (a ResNet-50 under AdamW: PyTorch in
# fp32 and in fp64 differ by 70% at step 3); momentum's steps are linear in the gradient.
LOSS_OPTIMIZER, LOSS_LR = "momentum", 1e-3


def mib(b):
    return f"{b / 2**20:,.0f}" if b >= 100 * 2**20 else f"{b / 2**20:.1f}"


def pct(pred, meas):
    return f"{100.0 * (pred - meas) / meas:+.1f}%" if meas else "-"


# ---------------------------------------------------------------- predict (here)

def plan_one(mapctl, pt, case, device_type, optimizer="adamw"):
    mbs = case["batch"] // case["micro_batches"]
    pins = f"tp=1,pp=1,dp=1,mbs={mbs},recompute={'full' if case['recompute'] else 'off'},zero=0"
    cmd = [mapctl, "plan", pt, "--input", models.input_spec(case), "--devices", "1", "--device-type", device_type,
           "--precision", case["precision"], "--optimizer", optimizer, "--pin", pins, "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"gpu-check predict: {' '.join(cmd)} failed:\n{out.stderr}")
    plan = json.loads(out.stdout)
    chosen = next((b for b in plan.get("baselines", []) if b.get("name") == plan.get("pinned")), plan)
    return {"predicted_peak_bytes": chosen["predicted_peak_bytes"], "predicted_step_seconds": chosen["predicted_step_seconds"],
            "micro_batches": chosen.get("micro_batches", case["micro_batches"]),
            "recomputed_layers": chosen.get("recomputed_layers", []), "fits": chosen.get("fits", True),
            "profile": plan.get("device", device_type)}


def selected(args, cases):
    return [c for c in cases if not args.only or re.search(args.only, c["name"])]


def out_of_time(args):
    """Past --deadline (seconds since the epoch) less a case's minute: the rest are left, so that
    a device session's time limit still returns the table."""
    return args.deadline is not None and time.time() > args.deadline - 60


def predict(args):
    cases = selected(args, models.cases(args.cases))
    result = {"cases": cases, "device_types": {}, "made_with": subprocess.run(
        [args.mapctl, "--version"], capture_output=True, text=True).stdout.strip()}
    traced = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            key = models.model_key(case)
            if key not in traced:
                traced[key] = os.path.join(tmp, f"model{len(traced)}.pt")
                models.trace(models.build(case), case, traced[key])
            for device_type in args.device_type:
                t0 = time.time()
                p = plan_one(args.mapctl, traced[key], case, device_type)
                if models.one_device_runtime(case):  # part (b)'s runs: momentum
                    p[LOSS_OPTIMIZER] = plan_one(args.mapctl, traced[key], case, device_type, LOSS_OPTIMIZER)
                result["device_types"].setdefault(device_type, {})[case["name"]] = p
                print(f"  {case['name']:<28} on {device_type:<10} {mib(p['predicted_peak_bytes']):>8} MiB "
                      f"{p['predicted_step_seconds'] * 1e3:9.2f} ms   ({time.time() - t0:.1f} s)", flush=True)
            # A big trace is large on disk: drop it once no later case needs it.
            if all(models.model_key(c) != key for c in cases[cases.index(case) + 1:]):
                os.unlink(traced[key])
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(f"gpu-check: predictions for {len(cases)} cases on {', '.join(args.device_type)} written to {args.output}")


# ---------------------------------------------------------------- PyTorch's step

class Step:
    """PyTorch's training step of a case: AdamW (foreach off: one parameter at a time, as MAP's
    optimizer), the loss in fp32, micro-batches accumulated, the layers MAP recomputes under
    torch.utils.checkpoint; bf16 keeps fp32 master weights in the optimizer and bf16 ones in the
    module, each gradient converted and freed a parameter at a time."""

    def __init__(self, module, case, device, recomputed_layers=(), optimizer="adamw", lr=LR):
        self.case, self.device = case, device
        self.bf16 = case["precision"] == "bf16"
        self.module = module.to(device)
        if self.bf16:
            self.module.to(torch.bfloat16)
        for name in recomputed_layers:
            self._recompute(self.module.get_submodule(name))
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        self.masters = [p.detach().float().clone() for p in self.params] if self.bf16 else self.params
        if optimizer == "adamw":
            self.opt = torch.optim.AdamW(self.masters, lr=lr, weight_decay=0.0, foreach=False)
        else:
            self.opt = torch.optim.SGD(self.masters, lr=lr, momentum=0.9, foreach=False)

    @staticmethod
    def _recompute(layer):
        from torch.utils.checkpoint import checkpoint
        forward = layer.forward
        layer.forward = lambda *a: checkpoint(forward, *a, use_reentrant=False)

    def __call__(self, x, y):
        m = self.case["micro_batches"]
        total = 0.0
        for xs, ys in zip(x.chunk(m), y.chunk(m)):
            if xs.is_floating_point() and self.bf16:
                xs = xs.to(torch.bfloat16)
            out = self.module(xs).float()
            loss = F.cross_entropy(out.reshape(-1, out.size(-1)), ys.reshape(-1)) / m
            loss.backward()
            total += loss.detach()
        if self.bf16:
            for p, w in zip(self.params, self.masters):
                w.grad = p.grad.float()
                p.grad = None
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if self.bf16:
            with torch.no_grad():
                for p, w in zip(self.params, self.masters):
                    p.copy_(w)
        return float(total)  # reading the loss back waits for the device


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_pytorch(case, device, recomputed_layers):
    step = Step(models.build(case), case, device, recomputed_layers)
    x, y = (t.to(device) for t in models.batch(case, case["batch"]))
    for _ in range(WARM_STEPS):
        step(x, y)
    cuda = device.startswith("cuda")
    if cuda:
        sync(device)
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(TIMED_STEPS):
        sync(device)
        t0 = time.perf_counter()
        step(x, y)
        sync(device)
        times.append(time.perf_counter() - t0)
    r = {"step_seconds": statistics.median(times)}
    if cuda:
        r["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        r["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    del step, x, y
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return r


def load_predictions(args):
    with open(args.predictions) as f:
        pred = json.load(f)
    if args.device_type not in pred["device_types"]:
        raise SystemExit(f"gpu-check: {args.predictions} has no predictions for device type '{args.device_type}' "
                         f"(it has: {', '.join(pred['device_types'])}); run `scripts/gpu-check.sh pack` with it")
    return pred, pred["device_types"][args.device_type]


def device_name(device):
    return torch.cuda.get_device_name() if device.startswith("cuda") else f"CPU ({os.cpu_count()} threads)"


def profile(args):
    """Part (a): MAP's prediction (made on the CPU beforehand) against PyTorch's own step."""
    pred, by_case = load_predictions(args)
    rows, results = [], []
    for case in selected(args, pred["cases"]):
        p = by_case[case["name"]]
        if out_of_time(args):
            rows.append(f"| {case['name']} | {mib(p['predicted_peak_bytes'])} | not run: out of time (--deadline) | | | | | |")
            continue
        try:
            m = measure_pytorch(case, args.device, p["recomputed_layers"])
        except RuntimeError as e:  # out of memory, or an op the device lacks: a row that says so
            m = {"error": str(e).splitlines()[0][:120]}
            gc.collect()
        results.append({"case": case["name"], "prediction": p, "pytorch": m})
        if "error" in m:
            rows.append(f"| {case['name']} | {mib(p['predicted_peak_bytes'])} | failed: {m['error']} | | | "
                        f"{p['predicted_step_seconds'] * 1e3:.1f} | | |")
            continue
        alloc = m.get("peak_allocated_bytes")
        mem = (f"{mib(alloc)} | {mib(m['peak_reserved_bytes'])} | {pct(p['predicted_peak_bytes'], alloc)}" if alloc
               else "n/a | n/a | n/a")
        rows.append(f"| {case['name']} | {mib(p['predicted_peak_bytes'])} | {mem} | {p['predicted_step_seconds'] * 1e3:.1f} | "
                    f"{m['step_seconds'] * 1e3:.1f} | {p['predicted_step_seconds'] / m['step_seconds']:.2f} |")
        print(rows[-1], flush=True)
    head = (f"Part (a), MAP's symbolic profile against PyTorch {torch.__version__} on {device_name(args.device)}: "
            f"predictions for `{args.device_type}` made beforehand ({pred.get('made_with', '?')}); PyTorch's step "
            f"measured over {TIMED_STEPS} steps after {WARM_STEPS} warm ones (median time, peak over all).\n\n"
            "| case | predicted peak MiB | allocated peak MiB | reserved peak MiB | peak error | predicted ms | "
            "measured ms | time ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    write_outputs(args, head, rows, results, "PyTorch keeps no allocator peak")


# ---------------------------------------------------------------- part (b): mapctl run

def run_mapctl(args, case, tmp):
    """Trains the case with `mapctl run` from PyTorch's weights and batch; returns its JSON."""
    module = models.build(case)
    pt, init = os.path.join(tmp, "model.pt"), os.path.join(tmp, "init.pt")
    models.trace(module, case, pt)
    torch.save(module.state_dict(), init)
    x, y = models.batch(case, case["batch"])
    import numpy as np
    np.save(os.path.join(tmp, "x.npy"), x.numpy())
    np.save(os.path.join(tmp, "y.npy"), y.numpy())
    cmd = [args.mapctl, "run", pt, "--input", models.input_spec(case), "--init-from", init, "--data",
           f"npy:{tmp}/x.npy,{tmp}/y.npy", "--steps", str(LOSS_STEPS + TIMED_STEPS), "--log-every", "1", "--lr", str(LOSS_LR),
           "--optimizer", LOSS_OPTIMIZER, "--device", args.device, "--precision", case["precision"], "-o", "json"]
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, f"mapctl run failed ({out.returncode}): {out.stderr.strip().splitlines()[-1][:160] if out.stderr.strip() else ''}"
    return json.loads(out.stdout), f"{time.time() - t0:.0f} s"


def pytorch_losses(case, device, dtype=None):
    """PyTorch's losses under the loss optimizer; dtype float64 (or float32 for a bf16 case): the
    same training a precision up, whose distance from the case's own is PyTorch's rounding noise."""
    if dtype is not None:
        case = dict(case, precision="fp32")
    module = models.build(case)
    if dtype is not None:
        module = module.to(dtype)
    step = Step(module, case, device, optimizer=LOSS_OPTIMIZER, lr=LOSS_LR)
    x, y = (t.to(device) for t in models.batch(case, case["batch"]))
    if dtype is not None and x.is_floating_point():
        x = x.to(dtype)
    losses = [step(x, y) for _ in range(LOSS_STEPS)]
    del step
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return losses


def distances(a, b):
    """|a - b| relative to b, the denominator floored at a tenth of the first loss (a loss that
    falls to nothing makes any relative difference large)."""
    floor = 0.1 * abs(b[0])
    return [abs(x - y) / max(abs(y), floor, 1e-12) for x, y in zip(a, b)]


def compare_losses(case, device, mine, want, base_tol):
    """(equal, worst distance, tolerance used). Within base_tol, equal. Else PyTorch is run a
    precision up (fp64 for fp32, fp32 for bf16) and MAP's losses may be as far from PyTorch's as
    twice the farthest PyTorch's are from their own a precision up: an ill-conditioned model (a
    ResNet-50 at initialisation, whose conv1 gradient PyTorch computes 1.5% apart in fp32 and
    fp64) parts correct runs that far after a step. The first loss, a forward alone, stays held
    to base_tol in fp32."""
    worst = max(distances(mine, want))
    if worst <= base_tol:
        return True, worst, base_tol
    first_ok = case["precision"] != "fp32" or distances(mine, want)[0] <= base_tol
    finer = pytorch_losses(case, device, torch.float64 if case["precision"] == "fp32" else torch.float32)
    tol = max(base_tol, 2 * max(distances(want, finer)))
    return first_ok and worst <= tol, worst, tol


def run(args):
    """Part (b): MAP's runtime on the device, from the weights and batch PyTorch trains."""
    pred, by_case = load_predictions(args)
    tol = {"fp32": 1e-3, "bf16": 3e-2}
    rows, results, failures = [], [], 0
    for case in selected(args, pred["cases"]):
        if not models.one_device_runtime(case):
            rows.append(f"| {case['name']} | not run: micro-batches and recomputation run on the rank runtime, whose programs "
                        "compute on the CPU (docs/runtime.md) | | | | | | |")
            continue
        if out_of_time(args):
            rows.append(f"| {case['name']} | not run: out of time (--deadline) | | | | | | |")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            got, note = run_mapctl(args, case, tmp)
        if got is None:
            failures += 1
            rows.append(f"| {case['name']} | {note} | | | | | | |")
            print(rows[-1], flush=True)
            continue
        p = by_case[case["name"]][LOSS_OPTIMIZER]
        want = pytorch_losses(case, args.device)
        steps = got["steps"]
        mine = [s["loss"] for s in steps[:LOSS_STEPS]]
        equal, worst, used = compare_losses(case, args.device, mine, want, tol[case["precision"]])
        failures += 0 if equal else 1
        timed = steps[LOSS_STEPS:] or steps[1:]
        seconds = statistics.median(s["seconds"] for s in timed)
        peak = max((s.get("device_peak_allocated_bytes", 0) for s in timed), default=0)
        results.append({"case": case["name"], "map_losses": mine, "pytorch_losses": want, "worst_relative": worst,
                        "tolerance": used,
                        "step_seconds": seconds, "peak_allocated_bytes": peak, "prediction": p})
        mem = f"{mib(peak)} | {pct(p['predicted_peak_bytes'], peak)}" if peak else "n/a | n/a"
        rows.append(f"| {case['name']} | {' '.join(f'{v:.4f}' for v in mine)} | {' '.join(f'{v:.4f}' for v in want)} | "
                    f"{worst:.1e} {'ok' if equal else 'DIFFERENT'}{f' (noise {used:.1e})' if used > tol[case['precision']] else ''} | {mib(p['predicted_peak_bytes'])} | {mem} | "
                    f"{p['predicted_step_seconds'] * 1e3:.1f} / {seconds * 1e3:.1f} |")
        print(rows[-1], flush=True)
    head = (f"Part (b), `mapctl run --device {args.device}` (MAP's runtime, LibTorch {torch.__version__.split('+')[0]}'s build "
            f"here) on {device_name(args.device)}, from PyTorch's weights and batch: the first {LOSS_STEPS} losses against "
            f"PyTorch's under SGD with momentum 0.9, lr {LOSS_LR:g} (tolerance fp32 {tol['fp32']:g}, bf16 {tol['bf16']:g} relative — or twice PyTorch's own distance from itself a precision up, shown as noise), then peak and step time over "
            f"{TIMED_STEPS} more steps against `{args.device_type}`'s prediction.\n\n"
            "| case | MAP's losses | PyTorch's losses | worst relative difference | predicted peak MiB | measured peak MiB | "
            "peak error | predicted / measured ms |\n|---|---|---|---|---:|---:|---:|---|")
    write_outputs(args, head, rows, results, "the runtime reports no device allocator peak")
    if failures:
        raise SystemExit(f"gpu-check: {failures} case(s) of part (b) failed or gave another loss than PyTorch")


def write_outputs(args, head, rows, results, on_cpu):
    """The table (head, rows, and on the CPU why its memory columns are empty) to stdout and,
    with --out, to NAME.md beside the results as NAME.json."""
    table = head + "\n" + "\n".join(rows) + "\n"
    if not args.device.startswith("cuda"):
        table += f"\n(On the CPU {on_cpu}: the memory columns are for a GPU.)\n"
    print("\n" + table)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{args.command}.md"), "w") as f:
            f.write(table)
        with open(os.path.join(args.out, f"{args.command}.json"), "w") as f:
            json.dump(results, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="MAP's predictions, here")
    p.add_argument("--mapctl", required=True)
    p.add_argument("--cases", choices=["cuda", "cpu"], required=True, help="the GPU's list or the CPU rehearsal's")
    p.add_argument("--device-type", action="append", required=True, help="repeatable: h100-80g, h200-141g, auto, ...")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--only", help="the cases whose names match this regular expression")
    for name in ("profile", "run"):
        q = sub.add_parser(name, help="part (a)" if name == "profile" else "part (b)")
        q.add_argument("--predictions", required=True)
        q.add_argument("--device", default="cuda")
        q.add_argument("--device-type", required=True, help="whose predictions to compare with")
        q.add_argument("--out", help="write NAME.md and NAME.json here")
        q.add_argument("--only", help="the cases whose names match this regular expression")
        q.add_argument("--deadline", type=float, help="seconds since the epoch: cases not begun a minute before are left")
        if name == "run":
            q.add_argument("--mapctl", required=True)
    args = ap.parse_args()
    if getattr(args, "device", "cpu").startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"gpu-check: --device {args.device}, but PyTorch {torch.__version__} sees no GPU")
    {"predict": predict, "profile": profile, "run": run}[args.command](args)


if __name__ == "__main__":
    main()

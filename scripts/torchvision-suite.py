#!/usr/bin/python3
"""torchvision's classification models through MAP: import, profile against a measured step,
and train on 4 ranks against one process.

Usage:
  /usr/bin/python3 scripts/torchvision-suite.py --mapctl build/client/mapctl/mapctl [options]
  /usr/bin/python3 scripts/torchvision-suite.py --from-json all.json --from-json rerun.json --markdown t.md

Options:
  --models a,b,...    only these constructors (default: every classification model of
                      torchvision.models, as torchvision 0.14 lists them)
  --stages S          comma list of import, profile, ranks (default: all three)
  --batch N           batch of the traced input (default 8: 2 samples a rank, as batch norm needs)
  --max-params N      models with more parameters are imported and profiled but not run on
                      ranks (default 200000000: 4 ranks and the reference process share this
                      machine's memory, each rank's plan budgeted a fifth of it)
  --timeout S         seconds per mapctl command (default 900)
  --markdown FILE     write the table (docs/profiler.md's "torchvision" table) to FILE
  --json FILE         write every result as JSON
  --retry-resolution N  when the 4-rank check fails in fp32, trace the model at N pixels and
                      run it again in fp32 (batch norms over more values amplify the rounding
                      less); its result is the model's, marked with the resolution
  --float64-retry     when the 4-rank check still fails in fp32, trace and run the model again
                      in float64: equal there, the fp32 gap is rounding the model amplifies
                      (batch norms over a few values), not the plan
  --check             exit 1 unless every model imports, profiles within 5% of its measured
                      peak and (when run on ranks) equals one process within 1e-4 (the test)
  --from-json FILE    render the table from saved --json results instead of running
                      (repeatable; a later file's models replace an earlier one's)

Each model is built without pretrained weights (num_classes=10), traced in train mode at the
smallest of 32, 64, 96, 128 and 224 pixels its forward accepts (ViT is built for 32 pixels,
MaxViT, whose windows need 224, for 224), saved with its input spec embedded, and given to mapctl: `import`; `profile
--measure` (predicted vs measured peak of a real step on this CPU); `run --ranks 4 --steps 1
--check-reference --optimizer sgd` (MAP's plan on 4 Gloo ranks vs one process: the loss and
every parameter after one step). One step, because a second one compares chaos rather than
the distribution: the ranks' all-reduced gradients differ from one process's sums in the last
bits, and through a hundred batch norms over a few values each (2x2 maps at 32 pixels) the
second step grows that to 1e-4..1e-2 (DenseNet-121: 3e-7 after one step under pure data
parallelism, 2e-4 after two), the same under data parallelism as under MAP's plan. A failure
records the first line of mapctl's error. Needs Debian's python3-torch and python3-torchvision.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

sys.dont_write_bytecode = True

import torch  # noqa: E402
import torchvision  # noqa: E402
from torchvision import models as tvm  # noqa: E402

RESOLUTIONS = (32, 64, 96, 128, 224)
# Constructor arguments beyond num_classes: sizes for models that fix theirs, no auxiliary heads.
EXTRA_ARGS = {
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception_v3": {"aux_logits": False, "init_weights": True},
    "vit_b_16": {"image_size": 32}, "vit_b_32": {"image_size": 32}, "vit_l_16": {"image_size": 32},
    "vit_l_32": {"image_size": 32}, "vit_h_14": {"image_size": 28},
    "maxvit_t": {"input_size": (224, 224)},
}
FIXED_RESOLUTION = {"vit_b_16": 32, "vit_b_32": 32, "vit_l_16": 32, "vit_l_32": 32, "vit_h_14": 28,
                    "maxvit_t": 224}


def classification_models():
    names = tvm.list_models(module=tvm)
    return sorted(n for n in names if not n.startswith("quantized"))


def build(name):
    torch.manual_seed(0)
    return tvm.get_model(name, weights=None, num_classes=10, **EXTRA_ARGS.get(name, {}))


def trace(name, model, batch, outdir, dtype=torch.float32, resolution=None):
    """Traces `model` at the smallest resolution it accepts (or `resolution`); returns (path, spec,
    resolution)."""
    model.train()
    sizes = [FIXED_RESOLUTION[name]] if name in FIXED_RESOLUTION else RESOLUTIONS
    if resolution is not None:
        sizes = [resolution]
    last = None
    for res in sizes:
        x = torch.randn(batch, 3, res, res, dtype=dtype)
        try:
            with torch.no_grad():
                model(x)
        except Exception as e:  # the model's own refusal of this size
            last = e
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jit = torch.jit.trace(model, (x,), check_trace=False)
        dname = "float64" if dtype == torch.float64 else "float32"
        spec = f"x:{dname}[{batch},3,{res},{res}]"
        path = os.path.join(outdir, f"{name}.pt")
        inputs = {"inputs": [{"name": "x", "dtype": dname, "shape": [batch, 3, res, res]}]}
        torch.jit.save(jit, path, _extra_files={"mapd_inputs.json": json.dumps(inputs)})
        return path, spec, res
    raise RuntimeError(f"no resolution of {sizes} accepted: {str(last).splitlines()[0]}")


def rank_budget_mib():
    """A fifth of this machine's memory: 4 ranks and the one-process reference share it."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024 // 5
    return 4096


def mapctl(args, cmd, timeout):
    try:
        r = subprocess.run([args.mapctl, *cmd], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    except OSError as e:
        return None, f"cannot run {args.mapctl}: {e}"
    if r.returncode != 0:
        err = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        return None, (err[0] if err else r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}")
    return r.stdout, None


def run_model(args, name, outdir):
    res = {"model": name}
    t0 = time.time()
    try:
        model = build(name)
        res["params"] = sum(p.numel() for p in model.parameters())
        path, spec, res["resolution"] = trace(name, model, args.batch, outdir)
        del model
    except Exception as e:
        res["failure"] = f"trace: {str(e).splitlines()[0]}"
        return res
    stages = args.stages
    if "import" in stages:
        out, err = mapctl(args, ["import", path, "-o", os.path.join(outdir, f"{name}.pb")], args.timeout)
        res["imported"] = err is None
        if err:
            res["failure"] = f"import: {err}"
            return res
    if "profile" in stages:
        out, err = mapctl(args, ["profile", path, "--measure", "-o", "json"], args.timeout)
        if err:
            res["failure"] = f"profile: {err}"
            return res
        p = json.loads(out)
        res["predicted_peak_bytes"] = p["predicted_peak_bytes"]
        res["measured_peak_bytes"] = p["measured_peak_bytes"]
        res["peak_error"] = p["predicted_peak_bytes"] / p["measured_peak_bytes"] - 1
    if "ranks" in stages:
        if res["params"] > args.max_params:
            res["ranks_skipped"] = f"{res['params'] / 1e6:.0f}M parameters > --max-params"
        else:
            out, err = mapctl(args, ranks_command(path), args.timeout)
            if err:
                res["failure"] = f"ranks: {err}"
                if args.retry_resolution and "differs from one process" in err:
                    if retry_larger(args, name, outdir, res):
                        del res["failure"]
                        res["seconds"] = round(time.time() - t0, 1)
                        return res
                if args.float64_retry and "differs from one process" in err:
                    retry_float64(args, name, outdir, res)
                return res
            r = json.loads(out)
            res["plan"] = f"mesh {r['mesh']}, ZeRO-{r['zero_stage']}, micro-batches {r['micro_batches']}"
            res["loss_difference"] = r["reference_max_relative_loss_difference"]
            res["parameter_difference"] = r["reference_max_parameter_difference"]
    res["seconds"] = round(time.time() - t0, 1)
    return res


def ranks_command(path):
    return ["run", path, "--ranks", "4", "--steps", "1", "--optimizer", "sgd", "--lr", "0.01",
            "--memory-per-device", f"{rank_budget_mib()}MiB", "--check-reference", "-o", "json"]


def retry_larger(args, name, outdir, res):
    """The 4-rank check again in fp32 at --retry-resolution: batch norms over more values
    amplify the ranks' rounding less. True when it passes there."""
    if name in FIXED_RESOLUTION:
        return False
    model = build(name)
    try:
        path, _, _ = trace(name, model, args.batch, outdir, resolution=args.retry_resolution)
    except RuntimeError as e:
        res["retry_failure"] = str(e)
        return False
    del model
    out, err = mapctl(args, ranks_command(path), args.timeout)
    if err:
        res["retry_failure"] = err
        return False
    r = json.loads(out)
    res["retry_resolution"] = args.retry_resolution
    res["plan"] = f"mesh {r['mesh']}, ZeRO-{r['zero_stage']}, micro-batches {r['micro_batches']}"
    res["loss_difference"] = r["reference_max_relative_loss_difference"]
    res["parameter_difference"] = r["reference_max_parameter_difference"]
    return True


def fp32_step_error(name, batch, resolution, lr=0.01):
    """How far PyTorch's own one-process fp32 SGD step is from its float64 step from the same
    weights and input, by the ranks check's measure: the largest difference of a parameter after
    the step over its largest value, the worst parameter — leaving out parameters whose float64
    gradient is under 1e-6 of the model's largest (mathematically zero: a bias a batch norm
    cancels, where both dtypes only add noise). How ill-conditioned the step is in fp32: two fp32
    computations that sum in other orders can differ by up to this much."""
    torch.manual_seed(0)
    x = torch.randn(batch, 3, resolution, resolution)
    y = torch.randint(0, 10, (batch,))
    steps = []
    for dtype in (torch.float32, torch.float64):
        model = build(name).to(dtype).train()
        torch.nn.functional.cross_entropy(model(x.to(dtype)), y).backward()
        with torch.no_grad():
            steps.append({n: ((p - lr * p.grad).double(), p.grad.double())
                          for n, p in model.named_parameters() if p.grad is not None})
        del model
    s32, s64 = steps
    largest = max(g.abs().max().item() for _, g in s64.values())
    return max(((s32[n][0] - p).abs().max() / p.abs().max()).item()
               for n, (p, g) in s64.items() if g.abs().max().item() >= 1e-6 * largest)


def retry_float64(args, name, outdir, res):
    """The 4-rank check again with the model and its input in float64, and how far PyTorch's
    own fp32 step is from its float64 step (recorded in the JSON)."""
    res["fp32_step_error"] = fp32_step_error(name, args.batch, res["resolution"])
    model = build(name).double()
    path, _, _ = trace(name, model, args.batch, outdir, torch.float64)
    del model
    out, err = mapctl(args, ranks_command(path), args.timeout)
    if err:
        res["float64_failure"] = err
        return
    r = json.loads(out)
    res["float64_loss_difference"] = r["reference_max_relative_loss_difference"]
    res["float64_parameter_difference"] = r["reference_max_parameter_difference"]


def markdown(results, args):
    rows = ["| model | parameters | image | import | peak predicted / measured | 4 ranks vs one process | notes |",
            "|---|---|---|---|---|---|---|"]
    for r in results:
        peak = f"{r['peak_error'] * 100:+.1f}%" if "peak_error" in r else ""
        ranks = ""
        if "loss_difference" in r:
            ranks = f"loss {r['loss_difference']:.1e}, params {r['parameter_difference']:.1e}"
            if "retry_resolution" in r:
                ranks += f" (at {r['retry_resolution']}²: over 1e-4 at {r['resolution']}²)"
        elif "float64_parameter_difference" in r:
            ranks = (f"fp32 over 1e-4 (see notes); "
                     f"float64: loss {r['float64_loss_difference']:.1e}, params {r['float64_parameter_difference']:.1e}")
        notes = r.get("failure", r.get("ranks_skipped", r.get("plan", "")))
        params = f"{r['params'] / 1e6:.1f}M" if "params" in r else ""
        image = f"{r['resolution']}²" if "resolution" in r else ""
        rows.append(f"| {r['model']} | {params} | {image} | {'yes' if r.get('imported') else 'no'} | {peak} | {ranks} | "
                    f"{notes.replace('|', '/')} |")
    n = len(results)
    imported = sum(1 for r in results if r.get("imported"))
    within = sum(1 for r in results if "peak_error" in r and abs(r["peak_error"]) <= 0.05)
    equal = sum(1 for r in results if r.get("loss_difference", 1) < 1e-4 and r.get("parameter_difference", 1) < 1e-4)
    equal64 = sum(1 for r in results if r.get("float64_loss_difference", 1) < 1e-4
                  and r.get("float64_parameter_difference", 1) < 1e-4)
    summary = (f"{imported} of {n} import; {within} of {n} profile within 5% of the measured peak; "
               f"{equal} of {n} train on 4 ranks equal to one process in fp32 (loss and parameters within 1e-4)"
               + (f", {equal64} more in float64" if equal64 else "") + ". "
               f"torch {torch.__version__}, torchvision {torchvision.__version__}, batch {args.batch}.")
    return "\n".join(rows) + "\n\n" + summary + "\n"


def run_all(args):
    names = args.models.split(",") if args.models else classification_models()
    results = []
    with tempfile.TemporaryDirectory(prefix="mapd-torchvision-") as outdir:
        for name in names:
            r = run_model(args, name, outdir)
            results.append(r)
            print(json.dumps(r), flush=True)
            for f in os.listdir(outdir):
                os.remove(os.path.join(outdir, f))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mapctl", help="the mapctl to test (required unless --from-json)")
    ap.add_argument("--models", default="")
    ap.add_argument("--stages", default="import,profile,ranks")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-params", type=int, default=200_000_000)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--float64-retry", action="store_true")
    ap.add_argument("--retry-resolution", type=int, default=0)
    ap.add_argument("--from-json", action="append", default=[],
                    help="render the table from these saved --json results instead of running (repeatable: a "
                         "later file's models replace an earlier one's, e.g. a rerun of a few models)")
    args = ap.parse_args()
    args.stages = set(args.stages.split(","))
    torch.set_num_threads(1)
    if args.from_json:
        merged = {}
        for path in args.from_json:
            with open(path) as f:
                for r in json.load(f):
                    merged[r["model"]] = r
        results = [merged[k] for k in sorted(merged)]
    elif not args.mapctl:
        ap.error("give --mapctl (or --from-json to render saved results)")
    else:
        results = run_all(args)
    table = markdown(results, args)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.check:
        bad = [r["model"] for r in results if not passes(r, args)]
        if bad:
            print(f"FAILED: {', '.join(bad)}", file=sys.stderr)
            return 1
    return 0


def passes(r, args):
    """Whether a model met every bar of the stages run."""
    if "failure" in r:
        return False
    if "import" in args.stages and not r.get("imported"):
        return False
    if "profile" in args.stages and abs(r["peak_error"]) > 0.05:
        return False
    if "ranks" in args.stages and "ranks_skipped" not in r:
        return r["loss_difference"] < 1e-4 and r["parameter_difference"] < 1e-4
    return True


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The real-model families of tests/import/models (families.py) through MAP: import, profile
against a measured step, and train on 4 ranks against one process.

Usage:
  /usr/bin/python3 scripts/model-suite.py [--mapctl build/client/mapctl/mapctl] [options]

Options:
  --models a,b,...   only these archives (without _trace_train.pt), e.g. detr,schnet
  --generic-only     import with every hand-written entry disabled (MAPD_IMPORT_GENERIC_ONLY=1):
                     every aten op goes by the generic path (the floor's own test)
  --stages S         comma list of import, profile, ranks (default: all three)
  --steps N          training steps on ranks (default 3)
  --markdown FILE    write the table to FILE
  --update-docs      write the table into docs/importer.md (between its families markers)
  --json FILE        write every result as JSON
  --check N          exit 1 unless at least N models import, profile within --peak-tolerance
                     of their measured peak and train on 4 ranks within 1e-4 of one process

For each model: `mapctl import` (its nodes, and how many went by the generic ATen path);
`mapctl profile --measure` (predicted vs measured peak of a real fp32 AdamW step on this CPU);
`mapctl run --ranks 4 --check-reference` (MAP's plan on 4 Gloo ranks vs one process: the
losses and every parameter after momentum SGD steps). Integer inputs take the ranges the family
states (families.py). A failure records the first line of mapctl's error. Needs Debian's
python3-torch to trace the archives (tests/import/models/make_models.py).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests", "import", "models"))
from families import FAMILIES  # noqa: E402


def input_flags(fam):
    """--input NAME:DTYPE[SHAPE], with :LOW..HIGH for an integer input whose range the family states."""
    flags = []
    for spec in fam["inputs"]:
        name, rest = spec.split(":", 1)
        stated = fam.get("ranges", {}).get(name, "")
        m = re.match(r"\s*(-?\d+)\.\.(-?\d+)", stated)
        if m and rest.startswith("i64"):
            spec = f"{spec}:{m.group(1)}..{m.group(2)}"
        flags += ["--input", spec]
    return flags


def mapctl(args, cmd, *rest, timeout=900):
    env = dict(os.environ)
    if args.generic_only:
        env["MAPD_IMPORT_GENERIC_ONLY"] = "1"
    r = subprocess.run([args.mapctl, cmd, *rest], capture_output=True, text=True, timeout=timeout, env=env)
    err = next((line for line in r.stderr.splitlines() if line.strip()), "") if r.returncode else ""
    return r, err


def run_one(args, fam, archive, tmp):
    res = {"model": fam["archive"].replace("_trace_train.pt", ""), "family": fam["family"], "domain": fam["domain"]}
    flags = input_flags(fam) + ["--loss", fam["loss"]]
    stages = args.stages.split(",")
    if "import" in stages:
        out = os.path.join(tmp, res["model"] + ".json")
        r, err = mapctl(args, "import", archive, *input_flags(fam), "-o", out)
        if r.returncode:
            res["import_error"] = err
            return res
        with open(out) as f:
            nodes = json.load(f).get("nodes", [])
        res["nodes"] = len(nodes)
        res["generic_nodes"] = sum(1 for n in nodes if n.get("op") == "aten")
        res["generic_schemas"] = sorted({a["s"] for n in nodes if n.get("op") == "aten"
                                          for k, a in n.get("attrs", {}).items() if k == "schema"})
    if "profile" in stages:
        r, err = mapctl(args, "profile", archive, *flags, "--measure", "--optimizer", "adamw", "-o", "json")
        if r.returncode:
            res["profile_error"] = err
        else:
            p = json.loads(r.stdout)
            res.update(peak_error=p["peak_error"], predicted_peak=p["predicted_peak_bytes"],
                       measured_peak=p["measured_peak_bytes"], flops_estimated_share=p["flops_estimated_share"])
    if "ranks" in stages:
        r, err = mapctl(args, "run", archive, *flags, "--ranks", "4", "--steps", str(args.steps), "--optimizer",
                        "momentum", "--lr", "0.01", "--check-reference", "-o", "json")
        if r.returncode:
            res["ranks_error"] = err
        else:
            j = json.loads(r.stdout)
            res.update(ranks_loss_diff=j["reference_max_relative_loss_difference"],
                       ranks_param_diff=j["reference_max_parameter_difference"],
                       ranks_blocks=j["reference_parameter_blocks_compared"], plan=j.get("plan", ""))
    return res


def passed(res, tol):
    return ("peak_error" in res and abs(res["peak_error"]) <= tol and res.get("ranks_blocks", 0) > 0
            and res.get("ranks_loss_diff", 1) < 1e-4 and res.get("ranks_param_diff", 1) < 1e-4)


def markdown(results, tol):
    lines = ["| model | family | domain | nodes | generic nodes | peak error | FLOPs estimated | 4 ranks vs one process |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        if "import_error" in r:
            lines.append(f"| `{r['model']}` | {r['family']} | {r['domain']} | — | — | import fails: {r['import_error'][:120]} | | |")
            continue
        peak = f"{100 * r['peak_error']:+.2f}%" if "peak_error" in r else f"fails: {r.get('profile_error', '')[:80]}"
        est = f"{100 * r['flops_estimated_share']:.1f}%" if "flops_estimated_share" in r else "—"
        if "ranks_loss_diff" in r:
            ranks = f"loss {r['ranks_loss_diff']:.1e}, parameters {r['ranks_param_diff']:.1e}"
        else:
            ranks = f"fails: {r.get('ranks_error', 'not run')[:80]}"
        lines.append(f"| `{r['model']}` | {r['family']} | {r['domain']} | {r['nodes']} | {r['generic_nodes']} | {peak} | "
                     f"{est} | {ranks} |")
    ok = sum(1 for r in results if passed(r, tol))
    lines.append("")
    lines.append(f"{ok} of {len(results)} import, profile within {100 * tol:.0f}% of the measured peak and train on "
                 f"4 ranks within 1e-4 of one process.")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mapctl", default=os.path.join(ROOT, "build", "client", "mapctl", "mapctl"))
    ap.add_argument("--models", default="")
    ap.add_argument("--generic-only", action="store_true")
    ap.add_argument("--stages", default="import,profile,ranks")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--peak-tolerance", type=float, default=0.05)
    ap.add_argument("--markdown", default="")
    ap.add_argument("--update-docs", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--check", type=int, default=0)
    args = ap.parse_args()
    wanted = set(filter(None, args.models.split(",")))
    fams = [f for f in FAMILIES if not wanted or f["archive"].replace("_trace_train.pt", "") in wanted]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "import", "models", "make_models.py"), tmp],
                       check=True, capture_output=True)
        for fam in fams:
            res = run_one(args, fam, os.path.join(tmp, fam["archive"]), tmp)
            results.append(res)
            print(json.dumps(res), file=sys.stderr, flush=True)
    table = markdown(results, args.peak_tolerance)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    if args.update_docs:
        doc = os.path.join(ROOT, "docs", "importer.md")
        text = open(doc).read()
        begin, end = "<!-- families:begin -->", "<!-- families:end -->"
        head, rest = text.split(begin, 1)
        with open(doc, "w") as f:
            f.write(head + begin + "\n" + table + end + rest.split(end, 1)[1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    ok = sum(1 for r in results if passed(r, args.peak_tolerance))
    return 0 if ok >= args.check else 1


if __name__ == "__main__":
    sys.exit(main())

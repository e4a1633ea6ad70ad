#!/usr/bin/python3
"""Checks MAP's layering (docs/architecture.md, "Layers"): every quoted #include of a module's
sources names a module that module may depend on. Modules depend downwards only; the coordinator
(server/) and the worker (worker/) share the common layer and never include each other. Inside a
module its sub-folders depend downwards too (SUB_MAY_INCLUDE), and what the ranks link takes
only the solver-free part of the planner.

Usage: scripts/check-layering.py [REPO_ROOT]   (exit 1 listing each violation as FILE:LINE)
       scripts/check-layering.py --links-no-torch BINARY...   (exit 1 when `ldd` shows one links
                                                                LibTorch, c10 or Gloo)
       scripts/check-layering.py --links-no-solver BINARY...  (exit 1 when one links CBC or
                                                                another COIN-OR library)
"""
import os
import re
import subprocess
import sys

# module → the top-level directories its sources may include (besides system and third-party
# headers, which are not quoted paths into the tree).
MAY_INCLUDE = {
    "common": {"common", "proto"},
    "model": {"common", "model", "proto"},
    "planner": {"common", "model", "planner", "proto"},
    "worker": {"common", "model", "planner", "worker", "proto"},
    "server": {"common", "model", "planner", "server", "proto"},
    "client": {"common", "model", "planner", "worker", "client", "proto"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# Inside a module, its sub-folders in order: sub-folder → the sibling sub-folders its sources may
# include (files at a module's top level are not checked here). Each order is the build's: a
# sub-folder's library links only those below it.
SUB_MAY_INCLUDE = {
    "common": {"checkpoint": set(), "rpc": set(), "metrics": set()},
    "model": {
        "ir": set(),
        "ops": {"ir"},
        "graph": {"ir", "ops"},
        "zoo": {"ir", "ops", "graph"},
        "import": {"ir", "ops", "graph"},
    },
    "planner": {
        "profile": set(),
        "sharding": {"profile"},
        "solver": set(),
        "plan": {"profile", "sharding", "solver"},
        "lower": {"profile", "sharding", "plan"},
        "runnable": {"profile", "sharding", "solver", "plan", "lower"},
    },
    "worker": {
        "device": set(),
        "memory": set(),
        "launch": set(),
        "runtime": {"memory"},
        "local": {"runtime", "memory"},
        "measure": {"local", "runtime", "memory"},
        "transport": {"runtime", "memory"},  # how ranks talk; nothing of training
        "calibrate": {"transport", "runtime", "local", "memory", "device", "launch"},
        # (mapd-rank --calibrate-host measures the host for a worker)
        "rank": {"transport", "launch", "local", "memory", "runtime", "device", "calibrate"},
        # Checkpoint shards kept for peer workers: protos and checkpoint commits only.
        "shards": set(),
        # No LibTorch: the ranks are mapd-rank processes; of calibrate, the torch-free cache only.
        "daemon": {"device", "launch", "calibrate", "shards"},
    },
    "server": {
        "store": set(),
        "workers": set(),
        "jobs": {"store"},
        "dispatch": {"jobs", "workers", "store"},
        "api": {"dispatch", "jobs", "store", "workers"},
    },
    "client": {"mapctl": set(), "python": set()},
}

# What the lowering and the ranks may take from planner/plan: its part with no cost model and no
# solver (mapd_plan_graph), so that mapd-rank links no CBC.
SOLVER_FREE_PLAN_HEADERS = {"planner/plan/prepared_graph.h", "planner/plan/batch_dims.h", "planner/plan/micro_batch.h",
                            "planner/plan/stages.h", "planner/plan/describe.h", "planner/plan/one_f_one_b.h"}
SOLVER_FREE = ("planner/lower/", "worker/")


def sub_folder_violations(root):
    found = []
    for module, subs in SUB_MAY_INCLUDE.items():
        for sub, allowed in subs.items():
            base = os.path.join(root, module, sub)
            for dirpath, _, files in os.walk(base):
                for name in sorted(files):
                    if not name.endswith((".h", ".cc", ".cu")):
                        continue
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, root)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        for number, line in enumerate(f, 1):
                            m = INCLUDE.match(line)
                            if not m:
                                continue
                            parts = m.group(1).split("/")
                            if len(parts) > 2 and parts[0] == module and parts[1] in subs and parts[1] != sub and parts[1] not in allowed:
                                found.append(f"{rel}:{number}: {module}/{sub}/ may not include {m.group(1)} "
                                             f"({module}/{sub}/ may include {', '.join(sorted(allowed)) or 'no other sub-folder of ' + module})")
                            if (rel.startswith(SOLVER_FREE) and m.group(1).startswith("planner/plan/")
                                    and m.group(1) not in SOLVER_FREE_PLAN_HEADERS):
                                found.append(f"{rel}:{number}: {m.group(1)} is the planner's search (cost model, solver); "
                                             f"{rel.split('/')[0]}/ takes only {', '.join(sorted(SOLVER_FREE_PLAN_HEADERS))}")
    return found


def unlisted_sub_folders(root):
    """A sub-folder with sources that SUB_MAY_INCLUDE does not list would escape the check: name it."""
    found = []
    for module, subs in SUB_MAY_INCLUDE.items():
        base = os.path.join(root, module)
        for sub in sorted(os.listdir(base)):
            path = os.path.join(base, sub)
            if not os.path.isdir(path) or sub in subs:
                continue
            if any(n.endswith((".h", ".cc", ".cu")) for _, _, files in os.walk(path) for n in files):
                found.append(f"{module}/{sub}/: a sub-folder with sources that scripts/check-layering.py's SUB_MAY_INCLUDE "
                             f"does not list; add it with the sub-folders of {module}/ it may include")
    return found


def violations(root):
    found = []
    for module, allowed in MAY_INCLUDE.items():
        for dirpath, _, files in os.walk(os.path.join(root, module)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".cu")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        top = m.group(1).split("/", 1)[0]
                        if top in MAY_INCLUDE or top == "proto":
                            if top not in allowed:
                                rel = os.path.relpath(path, root)
                                found.append(f"{rel}:{number}: {module}/ may not include {m.group(1)} "
                                             f"({module}/ may include {', '.join(sorted(allowed))})")
    return found


# What a binary must not link, by the flag that checks it: LibTorch for the daemons (ranks are
# mapd-rank processes), the planner's ILP solver for the ranks (mapd-rank runs no search).
FORBIDDEN = {
    "--links-no-torch": (re.compile(r"^\s*(lib(torch\w*|c10\w*|gloo\w*)\.so\S*)", re.MULTILINE), "LibTorch, c10 or Gloo"),
    "--links-no-solver": (re.compile(r"^\s*(lib(Cbc\w*|Clp\w*|Cgl\w*|Osi\w*|CoinUtils\w*)\.so\S*)", re.MULTILINE),
                          "CBC or another COIN-OR library"),
}


def links_none_of(flag, binaries):
    pattern, what = FORBIDDEN[flag]
    bad = 0
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True, check=True).stdout
        found = sorted(set(m.group(1) for m in pattern.finditer(out)))
        if found:
            print(f"{b} links {', '.join(found)}: it must not (docs/architecture.md, \"Layers\")")
            bad += 1
        else:
            print(f"{b}: no {what}")
    return 1 if bad else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] in FORBIDDEN:
        return links_none_of(sys.argv[1], sys.argv[2:])
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root) + sub_folder_violations(root) + unlisted_sub_folders(root)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} finding(s) break the layering; see docs/architecture.md, \"Layers\"")
        return 1
    deps = "; ".join(m + "/ on " + ", ".join(sorted(a - {m})) for m, a in MAY_INCLUDE.items())
    print("layering ok: " + deps + "; and within them, " + ", ".join(
        f"{m}/ ({', '.join(subs)}: each on those its table names)" for m, subs in SUB_MAY_INCLUDE.items() if len(subs) > 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

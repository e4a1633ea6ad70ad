#!/usr/bin/python3
"""Checks MAP's layering (docs/architecture.md, "Layers"): every quoted #include of a module's
sources names a module that module may depend on. Modules depend downwards only; the coordinator
(server/) and the worker (worker/) share the common layer and never include each other.

Usage: scripts/check-layering.py [REPO_ROOT]   (exit 1 listing each violation as FILE:LINE)
       scripts/check-layering.py --links-no-torch BINARY...   (exit 1 when `ldd` shows one links
                                                                LibTorch, c10 or Gloo)
"""
import os
import re
import subprocess
import sys

# module → the top-level directories its sources may include (besides system and third-party
# headers, which are not quoted paths into the tree).
MAY_INCLUDE = {
    "common": {"common", "proto"},
    "planner": {"common", "planner", "proto"},
    "worker": {"common", "planner", "worker", "proto"},
    "server": {"common", "planner", "server", "proto"},
    "client": {"common", "planner", "worker", "client", "proto"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


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


TORCH_LIBRARIES = re.compile(r"^\s*(lib(torch\w*|c10\w*|gloo\w*)\.so\S*)", re.MULTILINE)


def links_no_torch(binaries):
    bad = 0
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True, check=True).stdout
        found = sorted(set(m.group(1) for m in TORCH_LIBRARIES.finditer(out)))
        if found:
            print(f"{b} links {', '.join(found)}: it must not (docs/architecture.md, \"Layers\")")
            bad += 1
        else:
            print(f"{b}: no LibTorch, c10 or Gloo")
    return 1 if bad else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--links-no-torch":
        return links_no_torch(sys.argv[2:])
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) break the layering; see docs/architecture.md, \"Layers\"")
        return 1
    deps = "; ".join(m + "/ on " + ", ".join(sorted(a - {m})) for m, a in MAY_INCLUDE.items())
    print("layering ok: " + deps)
    return 0


if __name__ == "__main__":
    sys.exit(main())

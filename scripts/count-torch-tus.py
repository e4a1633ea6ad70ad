#!/usr/bin/python3
"""Counts the translation units of MAP's own sources that include LibTorch headers, directly or
through other headers — from the compiler's dependency records in a built Ninja tree
(`ninja -t deps`), so nothing is guessed. LibTorch headers cost ~20 s per translation unit on
the CI machine; docs/architecture.md ("Where LibTorch is included") lists each with its reason.

Usage: scripts/count-torch-tus.py [BUILD_DIR] [--list] [--max N]
  --max N   exit 1 when more than N translation units include LibTorch (CTest torch_translation_units:
            a new one is a decision, recorded with its reason in docs/architecture.md)
"""
import os
import re
import subprocess
import sys

TORCH = re.compile(r"/(torch|ATen|c10)/")


def torch_units(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    units, current, source, hit = {}, None, None, False
    for line in out.splitlines() + [""]:
        if line and not line.startswith(" "):
            if current and source:
                units[source] = hit
            current, source, hit = line.split(":")[0], None, False
        elif line.strip():
            path = line.strip()
            if source is None:
                source = path  # the first dependency is the translation unit itself
            elif TORCH.search(path):
                hit = True
    if current and source:
        units[source] = hit
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours = {os.path.relpath(s, root): h for s, h in units.items() if s.startswith(root + "/") and "/build" not in s[len(root):]}
    return ours


def main():
    argv = sys.argv[1:]
    most = None
    if "--max" in argv:
        i = argv.index("--max")
        most = int(argv[i + 1])
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    build = args[0] if args else "build"
    if not os.path.exists(os.path.join(build, "build.ninja")):
        print(f"{build} is not a Ninja build tree: no dependency records to count from (skipped)")
        return 77  # CTest's SKIP_RETURN_CODE
    units = torch_units(build)
    with_torch = sorted(s for s, h in units.items() if h)
    by_dir = {}
    for s in with_torch:
        by_dir.setdefault(os.path.dirname(s), []).append(os.path.basename(s))
    print(f"{len(with_torch)} of {len(units)} translation units include LibTorch headers")
    for d in sorted(by_dir):
        print(f"  {d}/: {len(by_dir[d])}" + (f" ({', '.join(sorted(by_dir[d]))})" if "--list" in argv else ""))
    if most is not None and len(with_torch) > most:
        print(f"{len(with_torch)} include LibTorch, over the {most} docs/architecture.md justifies: keep LibTorch out of the new "
              f"ones, or record why they need it (docs/architecture.md, \"Where LibTorch is included\") and raise --max")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Regenerates the op tables of docs/ops.md and docs/importer.md from `mapctl ops`.

    /usr/bin/python3 scripts/gen-ops-doc.py build/client/mapctl/mapctl

The CLI tests check that the docs list every registered op and every mapped aten op,
so run this after adding one.
"""
import json
import os
import subprocess
import sys

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")


def replace_between(path, begin, end, body):
    text = open(path).read()
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + body + "\n" + end + tail)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ops = json.loads(subprocess.run([sys.argv[1], "ops", "-o", "json"], check=True, capture_output=True,
                                    text=True).stdout)
    rows = ["| op | inputs | attributes | what it computes |", "| --- | --- | --- | --- |"]
    for op in ops:
        rows.append("| `{}` | {} | {} | {} |".format(op["name"], ", ".join(op["inputs"]) or "-",
                                                    ", ".join(op["attrs"]) or "-", op["summary"].replace("|", "\\|")))
    replace_between(os.path.join(DOCS, "ops.md"), "<!-- ops:begin -->", "<!-- ops:end -->", "\n".join(rows))
    rows = json.loads(subprocess.run([sys.argv[1], "ops", "--aten", "-o", "json"], check=True, capture_output=True,
                                     text=True).stdout)
    aten = [r["op"] for r in rows if r["path"] == "entry"]  # the generic path takes the rest
    replace_between(os.path.join(DOCS, "importer.md"), "<!-- aten:begin -->", "<!-- aten:end -->",
                    ", ".join(f"`{a}`" for a in aten))
    print(f"docs/ops.md: {len(ops)} ops; docs/importer.md: {len(aten)} aten ops")


if __name__ == "__main__":
    main()

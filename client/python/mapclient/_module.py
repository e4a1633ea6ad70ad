"""A torch.nn.Module as a MAP training graph: torch.jit.trace, torch.jit.save, `mapctl import`.

MAP trains the loss a graph returns (output 0), so the module's ``forward`` must compute the loss
from its inputs (targets included) — e.g. ``return F.cross_entropy(self.net(x), y)`` — as
``mapctl submit model.pt --loss output`` expects of an archive. The coordinator takes no file
paths, so every parameter's values travel inside the graph (as ``mapctl submit`` sends them).
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Optional, Sequence, Tuple

from mapclient._errors import MapError

# torch dtype names -> (mapctl's input spec dtype, mapd.v1.DType name)
_DTYPES = {
    "torch.float32": ("f32", "FLOAT32"), "torch.float16": ("f16", "FLOAT16"), "torch.bfloat16": ("bf16", "BFLOAT16"),
    "torch.float64": ("f64", "FLOAT64"), "torch.int64": ("i64", "INT64"), "torch.int32": ("i32", "INT32"),
    "torch.int16": ("i16", "INT16"), "torch.int8": ("i8", "INT8"), "torch.uint8": ("u8", "UINT8"), "torch.bool": ("bool", "BOOL"),
}
_FLOATS = {"FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64"}


def _built_beside() -> Optional[str]:
    """The mapctl built in the MAP source tree this package was installed from (setup.py records
    it; $MAPD_BUILD_DIR names the build folder as scripts/build.sh's, default `build`), if there."""
    try:
        from mapclient._source_tree import SOURCE_TREE
    except ImportError:  # not built by setup.py (a bare checkout on sys.path)
        SOURCE_TREE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    build = os.environ.get("MAPD_BUILD_DIR") or "build"
    path = os.path.join(SOURCE_TREE, build, "client", "mapctl", "mapctl")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def find_mapctl(mapctl: Optional[str] = None) -> str:
    """The mapctl binary to run: `mapctl` if given, else $MAPCTL, else ``mapctl`` on PATH, else
    the one built in the MAP source tree this package was installed from.

    Raises:
        MapError: NOT_FOUND when none of them names an executable.
    """
    for candidate, origin in ((mapctl, "mapctl="), (os.environ.get("MAPCTL"), "$MAPCTL")):
        if candidate:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
            raise MapError("NOT_FOUND", f"{origin} names {candidate!r}, which is not an executable mapctl", "mapctl")
    found = shutil.which("mapctl") or _built_beside()
    if found:
        return found
    raise MapError("NOT_FOUND", "mapctl was not found: submitting a torch.nn.Module converts it with `mapctl import`; pass "
                   "mapctl=PATH, set $MAPCTL, put MAP's mapctl on PATH, or build MAP (scripts/build.sh) in the source tree "
                   "mapclient was installed from", "mapctl")


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("module= needs PyTorch (Debian: python3-torch; a venv made with --system-site-packages sees it)") from e
    return torch


def _inputs(example_inputs: Any) -> Tuple[Any, ...]:
    torch = _torch()
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if example_inputs is None or not isinstance(example_inputs, (tuple, list)) or not example_inputs:
        raise TypeError("example_inputs: give a tuple of tensors, one per forward() argument (targets included), e.g. (x, y)")
    for i, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"example_inputs[{i}] is a {type(t).__name__}; MAP's graphs take tensors only")
        if str(t.dtype) not in _DTYPES:
            raise TypeError(f"example_inputs[{i}] is {t.dtype}; MAP's inputs are one of {', '.join(sorted(_DTYPES))}")
    return tuple(example_inputs)


def input_specs(traced: Any, example_inputs: Sequence[Any], input_ranges: Optional[dict] = None) -> list:
    """`mapctl import`'s --input specs, NAME:DTYPE[D0,...], of a traced module's forward arguments;
    NAME:DTYPE[D0,...]:LOW..HIGH for an integer input given a range in ``input_ranges``."""
    names = [a.name for a in traced.forward.schema.arguments][1:]  # [0] is self
    if len(names) != len(example_inputs):
        raise TypeError(f"forward() takes {len(names)} argument(s) ({', '.join(names)}) and {len(example_inputs)} example input(s) "
                        "were given")
    ranges = dict(input_ranges or {})
    unknown = sorted(set(ranges) - set(names))
    if unknown:
        raise TypeError(f"input_ranges names {', '.join(unknown)}, not forward() arguments ({', '.join(names)})")
    specs = []
    for n, t in zip(names, example_inputs):
        spec = f"{n}:{_DTYPES[str(t.dtype)][0]}[{','.join(str(d) for d in t.shape)}]"
        if n in ranges:
            low, high = ranges[n]
            if not (isinstance(low, int) and isinstance(high, int)) or low > high:
                raise ValueError(f"input_ranges[{n!r}] = {ranges[n]!r}: (low, high), integers, both inclusive, low <= high")
            spec += f":{low}..{high}"
        specs.append(spec)
    return specs


def _run_mapctl(mapctl: str, args: Sequence[str], what: str) -> str:
    try:
        r = subprocess.run([mapctl, *args], capture_output=True, text=True, timeout=600)
    except OSError as e:
        raise MapError("NOT_FOUND", f"cannot run {mapctl}: {e}", what) from e
    if r.returncode != 0:
        # mapctl's errors: `error: <message> [CODE]`.
        text = r.stderr.strip() or r.stdout.strip()
        m = re.search(r"error: (.*) \[([A-Z_]+)\]\s*$", text, re.DOTALL)
        if m:
            raise MapError(m.group(2), m.group(1), what)
        raise MapError("UNKNOWN", f"mapctl {' '.join(args)} exited {r.returncode}: {text}", what)
    return r.stdout


def _tensor_bytes(t: Any, dtype_name: str) -> bytes:
    torch = _torch()
    target = next(getattr(torch, k.split(".")[1]) for k, v in _DTYPES.items() if v[1] == dtype_name)
    t = t.detach().to("cpu").to(target).contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def _find_tensor(traced: Any, key: str) -> Any:
    for name, p in traced.named_parameters():
        if name == key:
            return p
    for name, b in traced.named_buffers():
        if name == key:
            return b
    cur = traced
    for part in key.split("."):  # a plain tensor attribute
        if not hasattr(cur, part):
            return None
        cur = getattr(cur, part)
    return cur if isinstance(cur, _torch().Tensor) else None


def module_to_graph(module: Any, example_inputs: Any, *, mapctl: Optional[str] = None, name: Optional[str] = None,
                    input_ranges: Optional[dict] = None) -> Any:
    """Converts a ``torch.nn.Module`` into the ``mapd.v1.Graph`` a job trains.

    The module is traced with ``torch.jit.trace(module, example_inputs)`` in its current mode
    (train or eval; its buffers are put back as they were before the trace's forward pass), saved to a temporary directory as ``NAME.pt`` and converted by
    ``mapctl import NAME.pt --input ARG:DTYPE[SHAPE]... -o graph.pb`` (one spec per ``forward``
    argument, from the example inputs). The graph keeps one output, the loss: the first
    floating-point scalar ``forward`` returns (a module returning ``(logits, loss)`` works too);
    its parameters and buffers carry their values (the coordinator takes no file paths).

    Args:
        module: the model; its ``forward(*example_inputs)`` returns the training loss.
        example_inputs: one tensor per ``forward`` argument, targets included, with the shapes
            and dtypes every step is fed (the batch size is the first dimension's).
        mapctl: the mapctl binary (else $MAPCTL, else PATH).
        name: the graph's name (default: the module's class name).
        input_ranges: ``{"t": (0, 999)}``: the values of integer inputs MAP cannot bound from the
            graph (both ends inclusive): a timestep, an id hashed before its embedding.

    Raises:
        TypeError: example inputs that are not tensors of MAP's dtypes, or not one per argument.
        ValueError: a forward that returns no floating-point scalar (no loss).
        MapError: no mapctl (NOT_FOUND), or ``mapctl import`` refusing the model (its code and
            message, e.g. INVALID_ARGUMENT naming an unsupported op).
    """
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module is a {type(module).__name__}, not a torch.nn.Module")
    inputs = _inputs(example_inputs)
    binary = find_mapctl(mapctl)
    from mapclient._stubs import graph_pb2
    name = name or type(module).__name__
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,200}", name) or name.startswith("."):
        raise ValueError(f"name {name!r}: letters, digits, '_', '.', '-' only")
    # Tracing runs forward once, which updates buffers in train mode (BatchNorm's running
    # statistics): the module keeps, and the job starts from, the buffers as they were.
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    try:
        traced = torch.jit.trace(module, inputs, check_trace=False)
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    specs = input_specs(traced, inputs, input_ranges)
    with tempfile.TemporaryDirectory(prefix="mapclient-") as tmp:
        archive = os.path.join(tmp, f"{name}.pt")
        traced.save(archive)
        out = os.path.join(tmp, "graph.pb")
        args = ["import", archive]
        for s in specs:
            args += ["--input", s]
        _run_mapctl(binary, [*args, "-o", out], "import")
        graph = graph_pb2.Graph()
        with open(out, "rb") as f:
            graph.ParseFromString(f.read())
    _keep_the_loss(graph)
    _inline_parameters(graph, traced)
    graph.metadata["source"] = f"{name}.pt (traced by mapclient)"
    return graph


def _keep_the_loss(graph: Any) -> None:
    from mapclient._stubs import graph_pb2
    types = {v.name: v.type for v in graph.values}
    types.update({i.name: i.type for i in graph.inputs})
    types.update({p.name: p.type for p in graph.parameters})
    described = []
    for out in graph.outputs:
        t = types.get(out)
        dtype = graph_pb2.DType.Name(t.dtype) if t is not None else "?"
        if t is not None and dtype in _FLOATS and len(t.shape) == 0:
            del graph.outputs[:]
            graph.outputs.append(out)
            return
        described.append(f"{out}: {dtype}[{','.join(str(d) for d in t.shape) if t is not None else '?'}]")
    raise ValueError("the module's forward() returns no floating-point scalar to train on (" + "; ".join(described) +
                     "): MAP trains the loss the model returns — compute it in forward from the inputs and targets, "
                     "e.g. `return F.cross_entropy(self.net(x), y)`")


def _inline_parameters(graph: Any, traced: Any) -> None:
    from mapclient._stubs import graph_pb2
    for p in graph.parameters:
        if not p.HasField("data") or not p.data.source:
            continue
        ref = p.data
        dtype = graph_pb2.DType.Name(ref.stored_dtype or p.type.dtype)
        if ref.inline_data or ref.key.startswith("constant:"):
            data = bytes(ref.inline_data)
        else:
            tensor = _find_tensor(traced, ref.key)
            if tensor is None:
                raise MapError("NOT_FOUND", f"the traced module has no tensor {ref.key!r} (parameter {p.name!r})", "import")
            data = _tensor_bytes(tensor, dtype)
        count = 1
        for d in p.type.shape:
            count *= d
        itemsize = {"FLOAT64": 8, "INT64": 8, "FLOAT32": 4, "INT32": 4, "FLOAT16": 2, "BFLOAT16": 2, "INT16": 2}.get(dtype, 1)
        if len(data) != count * itemsize:
            raise MapError("DATA_LOSS", f"parameter {p.name!r}: {len(data)} bytes, its type {dtype}{list(p.type.shape)} needs "
                           f"{count * itemsize}", "import")
        ref.inline_data = data
        ref.ClearField("source")
        if not data:
            ref.key = "constant:inline"  # no bytes: still read inline (as mapctl submit does)

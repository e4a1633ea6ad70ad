#!/usr/bin/python3
"""MAP's data parallelism against PyTorch DDP on this machine: the same model, seed, global batch,
optimizer and threads, Gloo on CPU, run alternately; prints the median step time of each and
their ratio (docs/runtime.md, "Against PyTorch DDP").

Usage:  /usr/bin/python3 bench/ddp_bench.py [--mapctl build/client/mapctl/mapctl] [--ranks 2,4]
                                            [--models gpt,resnet] [--steps 15] [--rounds 3] [--zero 2,3]

Each (model, ranks) cell runs `rounds` times DDP, then MAP (`mapctl run MODEL.pt --ranks N
--strategy dp`: its ranks' collectives through shared memory, MAP's default on one machine), then
MAP with every collective by Gloo as DDP's (MAPD_SHARED_MEMORY_MIB=0), `steps` steps each; the first `warmup` steps of a run are dropped and the median
is over every other step of every round (36 by default). Both sides train the model PyTorch
traced: for MAP the TorchScript archive, for DDP the nn.Module it was traced from (dropout 0, so
the work is the same); rank r of DDP trains on the r-th slice of the global batch, as MAP's data
parallel ranks do. Threads: each rank cores/ranks intra-op threads on both sides (MAP's default;
torch.set_num_threads for DDP), and as many OpenBLAS threads: DDP's ranks start with
OMP_NUM_THREADS set to it, as MAP's launcher starts its ranks (Debian's torch multiplies matrices
with OpenBLAS, whose own pool otherwise takes every logical CPU in each rank). The ratio is MAP / DDP: under 1 means MAP is faster. Batch
norm: DDP's BatchNorm layers normalise each rank's samples by their own statistics, so MAP runs
the ResNet with `--batch-norm local` (the same statistics; MAP's default, `sync`, all-reduces them
as SyncBatchNorm would, which DDP does not do).

Then, for each cell, MAP's ZeRO stages (--zero, default 2 and 3) against its data parallelism
(`--strategy dp`) and its stage 0 on the same mesh (`--mesh N --zero Z`), alternating likewise. PyTorch FSDP would be the ZeRO-3 baseline; the
bench says why it is not run where this torch's FSDP does not import (torch 1.13 under Python
3.11).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "import", "models"))
import nanogpt  # noqa: E402
import resnet  # noqa: E402

LR = 1e-3


def make_model(name):
    """(module, example global-batch input, input spec for mapctl, loss on (output, target))."""
    torch.manual_seed(0)
    if name == "gpt":
        # The nanoGPT: tied weights, biases, vocabulary 512, width 128, 2 layers, 8 x 64 tokens.
        cfg = nanogpt.GPTConfig(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128, dropout=0.0, bias=True)
        model = nanogpt.GPT(cfg)
        x = torch.randint(0, 512, (8, 64))
        spec = {"name": "idx", "dtype": "int64", "shape": [8, 64]}
        target = lambda b: torch.randint(0, 512, (b, 64))  # noqa: E731
        loss = lambda out, t: F.cross_entropy(out.view(-1, out.size(-1)), t.view(-1))  # noqa: E731
        make_input = lambda b: torch.randint(0, 512, (b, 64))  # noqa: E731
    elif name == "resnet":
        model = resnet.TinyResNet(num_classes=10, width=32)
        x = torch.randn(16, 3, 32, 32)
        spec = {"name": "x", "dtype": "float32", "shape": [16, 3, 32, 32]}
        target = lambda b: torch.randint(0, 10, (b,))  # noqa: E731
        loss = F.cross_entropy
        make_input = lambda b: torch.randn(b, 3, 32, 32)  # noqa: E731
    else:
        raise SystemExit(f"unknown model {name}: give gpt or resnet")
    model.train()
    return model, x, spec, make_input, target, loss


def save_archive(name, path):
    model, x, spec, *_ = make_model(name)
    traced = torch.jit.trace(model, (x,), check_trace=False)
    torch.jit.save(traced, path, _extra_files={"mapd_inputs.json": json.dumps({"inputs": [spec]})})
    return spec["shape"][0]


def ddp_worker(rank, world, name, steps, threads, rdv, out):
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=world)
    model, x, _, make_input, target, loss_fn = make_model(name)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=LR, weight_decay=0.0)
    local = x.shape[0] // world
    torch.manual_seed(1 + rank)
    times = []
    for _ in range(steps):
        inp, tgt = make_input(local), target(local)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(inp), tgt)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def run_ddp(name, ranks, steps, threads):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        saved = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by each spawned rank's OpenBLAS as it loads
        try:
            mp.spawn(ddp_worker, args=(ranks, name, steps, threads, os.path.join(tmp, "rdv"), out), nprocs=ranks, join=True)
        finally:
            if saved is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        with open(out) as f:
            return json.load(f)


# Models with batch norm: MAP normalises each rank's samples alone, as DDP's BatchNorm does.
BATCH_NORM = {"gpt": "-", "resnet": "local"}


def run_map(mapctl, archive, ranks, steps, zero=None, batch_norm="-", gloo_only=False):
    """Step seconds of `mapctl run`: data parallel (--strategy dp), or MAP's plan on a 1-D mesh with
    ZeRO stage `zero`; its ranks' collectives through shared memory (the default) or, `gloo_only`,
    all by Gloo as DDP's (MAPD_SHARED_MEMORY_MIB=0)."""
    env = dict(os.environ, MAPD_SHARED_MEMORY_MIB="0") if gloo_only else None
    how = ["--strategy", "dp"] if zero is None else ["--mesh", str(ranks), "--zero", str(zero)]
    if batch_norm != "-":
        how += ["--batch-norm", batch_norm]
    r = subprocess.run([mapctl, "run", archive, "--ranks", str(ranks), *how, "--steps", str(steps),
                        "--lr", str(LR), "--log-every", "1", "-o", "json"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"mapctl run failed:\n{r.stderr}")
    return [s["seconds"] for s in json.loads(r.stdout)["steps"]]


def fsdp_unavailable():
    """Why PyTorch FSDP cannot be the ZeRO-3 baseline here (None if it can be imported)."""
    try:
        import torch.distributed.fsdp  # noqa: F401
    except Exception as e:  # torch 1.13's FSDP predates Python 3.11's dataclass rules
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mapctl", default=os.path.join(HERE, "..", "build", "client", "mapctl", "mapctl"))
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--models", default="gpt,resnet")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--zero", default="2,3", help="MAP ZeRO stages to time against MAP's stage 0 on the same mesh ('' for none)")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    print("| model | ranks | threads/rank | MAP batch norm | PyTorch DDP ms/step | MAP dp ms/step | MAP / DDP "
          "| MAP dp, Gloo only, ms/step | Gloo only / DDP | steps timed (each) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    zero_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            archive = os.path.join(tmp, f"{name}.pt")
            save_archive(name, archive)
            for ranks in [int(r) for r in a.ranks.split(",")]:
                threads = max(1, cores // ranks)
                ddp, ours, gloo = [], [], []
                for _ in range(a.rounds):  # alternate, so that drift in the machine hits all alike
                    ddp += run_ddp(name, ranks, a.steps, threads)[a.warmup:]
                    ours += run_map(a.mapctl, archive, ranks, a.steps, batch_norm=BATCH_NORM[name])[a.warmup:]
                    gloo += run_map(a.mapctl, archive, ranks, a.steps, batch_norm=BATCH_NORM[name], gloo_only=True)[a.warmup:]
                d, m, g = statistics.median(ddp), statistics.median(ours), statistics.median(gloo)
                print(f"| {name} | {ranks} | {threads} | {BATCH_NORM[name]} | {d * 1e3:.1f} | {m * 1e3:.1f} | {m / d:.2f} "
                      f"| {g * 1e3:.1f} | {g / d:.2f} | {len(ddp)} |", flush=True)
                stages = [int(z) for z in a.zero.split(",") if z]
                if stages:
                    # "dp": --strategy dp, timed again here so that it alternates with the stages.
                    times = {z: [] for z in ["dp", 0] + stages}
                    for _ in range(a.rounds):
                        for z in times:
                            zero = None if z == "dp" else z
                            times[z] += run_map(a.mapctl, archive, ranks, a.steps, zero=zero, batch_norm=BATCH_NORM[name])[a.warmup:]
                    zero_rows.append((name, ranks, {z: statistics.median(t) for z, t in times.items()}))
    if zero_rows:
        print()
        print("| model | ranks | MAP dp ms/step | MAP ZeRO-0 ms/step | " +
              " | ".join(f"ZeRO-{z} ms/step | ZeRO-{z} / dp | ZeRO-{z} / ZeRO-0" for z in stages) + " |")
        print("|---|---|---|---|" + "---|---|---|" * len(stages))
        for name, ranks, med in zero_rows:
            cells = " | ".join(f"{med[z] * 1e3:.1f} | {med[z] / med['dp']:.2f} | {med[z] / med[0]:.2f}" for z in stages)
            print(f"| {name} | {ranks} | {med['dp'] * 1e3:.1f} | {med[0] * 1e3:.1f} | {cells} |")
        why = fsdp_unavailable()
        print("\nPyTorch FSDP (the ZeRO-3 baseline): " +
              ("not run: this torch's FSDP does not import here (" + why + ")" if why else "importable, but not timed yet"))


if __name__ == "__main__":
    main()

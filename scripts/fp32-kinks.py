#!/usr/bin/python3
"""Why a split plan's fp32 step can differ from one process's by 1e-3 (docs/profiler.md, the
torchvision suite's notes): PyTorch alone, on MAP's synthetic batch, steps a torchvision model
once with SGD in fp32 and in float64, counts the ReLU inputs whose sign differs, and steps it again
with every convolution summed as N input-channel partials (a split plan's arithmetic).

Usage: /usr/bin/python3 scripts/fp32-kinks.py [--model resnet34] [--seeds 0,1,2,3] [--ways 4]
       [--trace FILE.pt]   (also save the model traced, for `mapctl run FILE.pt --ranks 4
                            --steps 1 --optimizer sgd --lr 0.01 --check-reference --seed S`)
"""
import argparse
import copy
import json

import torch
import torch.nn.functional as F
import torchvision

M64 = (1 << 64) - 1


def derive_seed(seed, purpose):
    """worker/runtime/seed.h DeriveSeed: FNV-1a of the purpose, mixed with the seed (SplitMix64)."""
    h = 0xCBF29CE484222325
    for c in purpose.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    z = ((h ^ ((seed * 0x9E3779B97F4A7C15) & M64)) + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def map_batch(seed, batch, classes, size):
    """MAP's synthetic batch for an image model's input x and targets (sources.cc BatchSource)."""
    g = torch.Generator()
    g.manual_seed(derive_seed(seed, "data:tensors"))
    return torch.randn(batch, 3, size, size, generator=g), torch.randint(0, classes, (batch,), generator=g)


def split_forward(conv, ways):
    def forward(inp):
        if conv.in_channels % ways or conv.groups != 1:
            return conv._conv_forward(inp, conv.weight, conv.bias)
        q = conv.in_channels // ways
        out = None
        for i in range(ways):
            part = F.conv2d(inp[:, i * q:(i + 1) * q], conv.weight[:, i * q:(i + 1) * q], None, conv.stride, conv.padding, conv.dilation)
            out = part if out is None else out + part
        return out if conv.bias is None else out + conv.bias.view(1, -1, 1, 1)
    return forward


def step(base, x, y, dtype, ways=0):
    """One SGD step (lr 0.01); the parameters after it, the loss, and every ReLU input's sign."""
    m = copy.deepcopy(base).to(dtype).train()
    signs = []
    for mod in m.modules():
        if isinstance(mod, torch.nn.Conv2d) and ways:
            mod.forward = split_forward(mod, ways)
        if isinstance(mod, torch.nn.ReLU):
            mod.register_forward_hook(lambda mod, i, o: signs.append(i[0] > 0))
    loss = F.cross_entropy(m(x.to(dtype)), y)
    loss.backward()
    with torch.no_grad():
        for p in m.parameters():
            p -= 0.01 * p.grad
    return {k: v.detach().double() for k, v in m.named_parameters()}, signs


def worst(a, b):
    """--check-reference's measure: the largest difference over max(1, the block's largest value)."""
    return max(((a[k] - b[k]).abs().max().item() / max(1.0, b[k].abs().max().item()), k) for k in a)


def flips(a, b):
    return sum(int((u != v).sum()) for u, v in zip(a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet34")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--ways", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--trace")
    args = ap.parse_args()
    torch.manual_seed(0)
    base = getattr(torchvision.models, args.model)(num_classes=10)
    if args.trace:
        x = torch.zeros(args.batch, 3, args.size, args.size)
        jit = torch.jit.trace(base.train(), (x,), check_trace=False)
        spec = {"inputs": [{"name": "x", "dtype": "float32", "shape": list(x.shape)}]}
        torch.jit.save(jit, args.trace, _extra_files={"mapd_inputs.json": json.dumps(spec)})
    print("seed  fp32 vs float64 (ReLU signs flipped)  split fp32 vs fp32 (flipped)")
    for seed in map(int, args.seeds.split(",")):
        x, y = map_batch(seed, args.batch, 10, args.size)
        p64, s64 = step(base, x, y, torch.float64)
        p32, s32 = step(base, x, y, torch.float32)
        ps, ss = step(base, x, y, torch.float32, args.ways)
        (d64, at64), (ds, ats) = worst(p32, p64), worst(ps, p32)
        print(f"{seed:4d}  {d64:.1e} at {at64} ({flips(s32, s64)})  {ds:.1e} at {ats} ({flips(ss, s32)})")


if __name__ == "__main__":
    main()

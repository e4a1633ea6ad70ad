"""Small misc models: a scripted MLP with shape-dependent control flow and a
traced model built from ops an importer is unlikely to support."""
from typing import List

import torch
import torch.nn as nn


class ScriptMLP(nn.Module):
    def __init__(self, in_features=8, hidden=16, num_layers=2, num_classes=4):
        super().__init__()
        layers = []
        d = in_features
        for _ in range(num_layers):
            layers.append(nn.Sequential(nn.Linear(d, hidden), nn.ReLU()))
            d = hidden
        self.layers = nn.ModuleList(layers)
        self.head = nn.Linear(d, num_classes)

    def forward(self, x):
        if x.dim() == 3:
            x = x.flatten(1)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class MobileBlock(nn.Module):
    """MobileNetV2's inverted residual without batch norms: a 1x1 expansion, ReLU6 in place
    (aten::hardtanh_), a depthwise 3x3, ReLU6, a 1x1 projection; then clamp, clamp_min and
    clamp_max, MobileNetV3's hardswish and hardsigmoid, a leaky ReLU, mish, log1p and sign, a
    global mean and a linear head."""

    def __init__(self, channels=3, hidden=12, out=8, classes=10):
        super().__init__()
        self.expand = nn.Conv2d(channels, hidden, 1)
        self.act1 = nn.ReLU6(inplace=True)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.act2 = nn.ReLU6()
        self.project = nn.Conv2d(hidden, out, 1)
        self.head = nn.Linear(out, classes)

    def forward(self, x):
        y = self.project(self.act2(self.depthwise(self.act1(self.expand(x)))))
        y = torch.clamp(y, -0.5, 0.5) + torch.clamp_min(y, -0.2) + torch.clamp_max(y, 0.3) + y.clamp(max=0.1)
        y = nn.functional.hardswish(y) * nn.functional.hardsigmoid(y) + nn.functional.leaky_relu(y, 0.2)
        y = nn.functional.mish(y) + torch.log1p(y.abs()) * torch.sign(y)
        return self.head(y.mean(dim=(2, 3)))


class Unsupported(nn.Module):
    """Uses cumsum x2, sort x1, flip x1 (plus a Linear so it has parameters)."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        x = self.proj(x)
        a = torch.cumsum(x, dim=-1)
        b = torch.cumsum(a, dim=0)
        s, _ = torch.sort(b, dim=-1)
        return torch.flip(s, dims=[-1])


# What we expect in Unsupported's inlined graph (make_models.py checks this).
UNSUPPORTED_OPS = {"aten::cumsum": 2, "aten::sort": 1, "aten::flip": 1}

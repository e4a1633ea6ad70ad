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

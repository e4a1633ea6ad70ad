"""Small models written as people write them in the wild, from their published descriptions: a
wav2vec2-style speech encoder, a DDPM-style U-Net, a top-k mixture of experts and a message-passing
graph network. make_models.py traces them (train mode)."""
import math

import torch
from torch import nn


class AudioEncoder(nn.Module):
    """A wav2vec 2.0 / HuBERT-style speech encoder (Baevski et al. 2020, Hsu et al. 2021) on a raw
    waveform [B, 1, T]: a convolutional feature extractor — Conv1d(kernel 10, stride 5) with a
    GroupNorm of one group per channel (wav2vec2's "group_norm" mode), then Conv1d(3, 2) and
    Conv1d(2, 2), GELU after each; transpose to [B, T', C], LayerNorm, a linear feature
    projection; the convolutional relative positional embedding — a grouped Conv1d with
    padding = kernel // 2 whose even kernel makes one frame too many, removed with a slice as
    wav2vec2's SamePad does, GELU — added; one pre-norm nn.TransformerEncoderLayer with GELU;
    a max_pool1d over time, the mean over time and a linear head."""

    def __init__(self, channels=8, dim=16, heads=2, pos_kernel=4, pos_groups=2, classes=10):
        super().__init__()
        self.conv0 = nn.Conv1d(1, channels, 10, stride=5, bias=False)
        self.norm0 = nn.GroupNorm(channels, channels, affine=True)
        self.conv1 = nn.Conv1d(channels, channels, 3, stride=2, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, 2, stride=2, bias=False)
        self.feature_norm = nn.LayerNorm(channels)
        self.projection = nn.Linear(channels, dim)
        self.pos_conv = nn.Conv1d(dim, dim, pos_kernel, padding=pos_kernel // 2, groups=pos_groups)
        self.remove = 1 if pos_kernel % 2 == 0 else 0
        self.layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.1, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = nn.functional.gelu(self.norm0(self.conv0(x)))
        x = nn.functional.gelu(self.conv1(x))
        # The last GELUs act after the transposes: LibTorch 1.13's erf-GELU backward is wrong for
        # a non-contiguous gradient (MAP's runtime makes it contiguous; PyTorch's reference, which
        # the tests compare with, does not).
        x = nn.functional.gelu(self.conv2(x).transpose(1, 2))
        x = self.projection(self.feature_norm(x))
        pos = self.pos_conv(x.transpose(1, 2))
        if self.remove > 0:
            pos = pos[:, :, : -self.remove]
        x = x + nn.functional.gelu(pos.transpose(1, 2))
        x = self.layer(x)
        x = nn.functional.max_pool1d(x.transpose(1, 2), kernel_size=2)
        return self.head(x.mean(-1))


def timestep_embedding(t, dim, max_period=10000):
    """DDPM / ADM's sinusoidal embedding of a float timestep t [B] -> [B, dim]."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    """DDPM's residual block: GroupNorm, SiLU, 3x3 conv, the time embedding added per channel,
    GroupNorm, SiLU, dropout, 3x3 conv, and a 1x1 conv on the shortcut when the width changes."""

    def __init__(self, cin, cout, tdim, groups=4, dropout=0.1):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(tdim, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, emb):
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        h = h + self.temb(nn.functional.silu(emb))[:, :, None, None]
        h = self.conv2(self.dropout(nn.functional.silu(self.norm2(h))))
        return self.shortcut(x) + h


class DiffusionUNet(nn.Module):
    """A DDPM-style noise-prediction U-Net (Ho et al. 2020) at toy size, forward(x [B,3,16,16],
    t [B] float) -> predicted noise [B,3,16,16]: the sinusoidal timestep embedding (arange, exp
    folded; cos, sin, cat of the input t) through Linear-SiLU-Linear; ResBlocks with GroupNorm(4),
    SiLU, dropout and the embedding added per channel; downsampling by stride-2 3x3 convs
    (16 -> 8 -> 4); upsampling by a ConvTranspose2d(kernel 2, stride 2) (4 -> 8) and by
    interpolate(scale_factor=2, mode="nearest") + a 3x3 conv (8 -> 16), each followed by a
    skip concatenated with torch.cat; the bottleneck also resized to full resolution with
    interpolate(scale_factor=4, mode="bilinear", align_corners=False) and added, as FPN-style
    decoders do; GroupNorm, SiLU and an output conv."""

    def __init__(self, channels=3, width=8, groups=4, dropout=0.1):
        super().__init__()
        self.width = width
        tdim = 2 * width
        self.time_mlp = nn.Sequential(nn.Linear(width, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inc = nn.Conv2d(channels, width, 3, padding=1)
        self.down_block1 = ResBlock(width, width, tdim, groups, dropout)
        self.down1 = nn.Conv2d(width, width, 3, stride=2, padding=1)
        self.down_block2 = ResBlock(width, width, tdim, groups, dropout)
        self.down2 = nn.Conv2d(width, width, 3, stride=2, padding=1)
        self.mid = ResBlock(width, width, tdim, groups, dropout)
        self.up1 = nn.ConvTranspose2d(width, width, 2, stride=2)
        self.up_block1 = ResBlock(2 * width, width, tdim, groups, dropout)
        self.up2 = nn.Conv2d(width, width, 3, padding=1)
        self.up_block2 = ResBlock(2 * width, width, tdim, groups, dropout)
        self.out_norm = nn.GroupNorm(groups, width)
        self.out = nn.Conv2d(width, channels, 3, padding=1)

    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.width))
        h1 = self.down_block1(self.inc(x), emb)                      # 16x16
        h2 = self.down_block2(self.down1(h1), emb)                   # 8x8
        m = self.mid(self.down2(h2), emb)                            # 4x4
        h = self.up_block1(torch.cat([self.up1(m), h2], dim=1), emb)  # 8x8
        h = self.up2(nn.functional.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.up_block2(torch.cat([h, h1], dim=1), emb)           # 16x16
        h = h + nn.functional.interpolate(m, scale_factor=4, mode="bilinear", align_corners=False)
        return self.out(nn.functional.silu(self.out_norm(h)))


class TopKMoE(nn.Module):
    """A top-k mixture-of-experts layer as Switch- and Mixtral-style code writes it with einsum
    (Shazeer et al. 2017, Fedus et al. 2021, Jiang et al. 2024) on x [B, S, D]: LayerNorm, router
    logits from a Linear(D, E); router probabilities by a softmax stabilised with torch.max's
    values; torch.topk(k=2) of the logits, the gates a softmax of the top-k values scattered into
    dense combine weights [B, S, E] with zeros_like(...).scatter; experts as stacked parameters
    applied with einsum "bsd,edh->ebsh", GELU, "ebsh,ehd->ebsd", and combined with
    "ebsd,bse->bsd"; a residual. Switch's load-balancing loss — the fraction of tokens whose
    argmax expert is each expert (one_hot(argmax), as float, averaged) times the mean router
    probability, summed, times E — is added (x 0.01, 0-d, broadcast) to the logits of a linear
    classifier on the mean over tokens."""

    def __init__(self, dim=8, hidden=16, experts=4, k=2, classes=10, aux_weight=0.01):
        super().__init__()
        self.experts, self.k, self.aux_weight = experts, k, aux_weight
        self.norm = nn.LayerNorm(dim)
        self.router = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, dim, hidden) * dim ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, dim) * hidden ** -0.5)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.norm(x)
        logits = self.router(h)                                   # [B, S, E]
        zmax, _ = torch.max(logits, dim=-1, keepdim=True)
        probs = torch.exp(logits - zmax)
        probs = probs / probs.sum(-1, keepdim=True)
        top_vals, top_idx = torch.topk(logits, self.k, dim=-1)    # [B, S, k]
        gates = torch.softmax(top_vals, dim=-1)
        combine = torch.zeros_like(logits).scatter(-1, top_idx, gates)
        # Experts first ("ebsh"): with "bseh" the GELU's gradient arrives permuted, for which
        # LibTorch 1.13's erf-GELU backward is wrong (see AudioEncoder).
        up = nn.functional.gelu(torch.einsum("bsd,edh->ebsh", h, self.w1))
        out = torch.einsum("ebsh,ehd->ebsd", up, self.w2)
        x = x + torch.einsum("ebsd,bse->bsd", out, combine)
        top1 = torch.argmax(probs, dim=-1)
        fraction = nn.functional.one_hot(top1, self.experts).float().mean((0, 1))
        aux = self.experts * (fraction * probs.mean((0, 1))).sum()
        return self.head(x.mean(1)) + self.aux_weight * aux


class MessagePassingGNN(nn.Module):
    """A message-passing graph network (Gilmer et al. 2017's MPNN, then a GAT-style layer,
    Velickovic et al. 2018) written as PyTorch Geometric's code does it, without PyG, on node
    features x [N, F] and edge_index [2, E] (row 0 sources, row 1 destinations). Layer 1: source
    and destination features gathered with index_select, an edge MLP on their concatenation,
    messages summed per destination with zeros(N, H).index_add_, divided by the in-degree
    (zeros(N).index_add_ of ones(E), clamp(min=1)), a root Linear added, ReLU. Layer 2: node
    scores a_src . Wh and a_dst . Wh picked per edge with torch.gather, leaky ReLU, a softmax per
    destination (exp of scores less their max, the sum per destination by scatter_add_, gathered
    back), weighted source features summed with zeros_like(...).scatter_add_ on an expanded index,
    ReLU. Readout: the mean over nodes and a linear head -> graph logits [1, classes]."""

    def __init__(self, features=8, hidden=16, classes=4):
        super().__init__()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * features, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.root = nn.Linear(features, hidden)
        self.lin = nn.Linear(hidden, hidden, bias=False)
        self.att_src = nn.Parameter(torch.randn(hidden) * hidden ** -0.5)
        self.att_dst = nn.Parameter(torch.randn(hidden) * hidden ** -0.5)
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        n = x.size(0)
        # Layer 1: MPNN with an edge network, mean aggregation.
        x_src = x.index_select(0, src)
        x_dst = torch.index_select(x, 0, dst)
        messages = self.edge_mlp(torch.cat([x_src, x_dst], dim=-1))        # [E, H]
        agg = torch.zeros(n, messages.size(1), dtype=x.dtype).index_add_(0, dst, messages)
        deg = torch.zeros(n, dtype=x.dtype).index_add_(0, dst, torch.ones(dst.size(0), dtype=x.dtype))
        h = torch.relu(self.root(x) + agg / deg.clamp(min=1).unsqueeze(-1))
        # Layer 2: GAT-style attention normalised per destination.
        wh = self.lin(h)                                                    # [N, H]
        alpha_src = (wh * self.att_src).sum(-1)
        alpha_dst = (wh * self.att_dst).sum(-1)
        e = nn.functional.leaky_relu(alpha_src.gather(0, src) + alpha_dst.gather(0, dst), 0.2)
        e = torch.exp(e - e.max())
        denom = torch.zeros(n, dtype=x.dtype).scatter_add_(0, dst, e)
        alpha = e / denom.gather(0, dst)
        msg = wh.index_select(0, src) * alpha.unsqueeze(-1)
        out = torch.zeros_like(wh).scatter_add_(0, dst.unsqueeze(-1).expand_as(msg), msg)
        h = torch.relu(out + self.bias)
        return self.head(h.mean(0, keepdim=True))

"""Small misc models: a scripted MLP with shape-dependent control flow and a
traced model built from ops an importer is unlikely to support."""
import math
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


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


class FoldedMasks(nn.Module):
    """Attention whose causal + sliding-window mask and rotary tables are built from tensors at
    trace time, as Mistral- and GPT-NeoX-style code does: arange, outer, comparisons,
    bitwise_not, &, detach, cos/sin of a plain tensor attribute. None of those has an importer
    handler; all depend on no input and no parameter, so the importer folds them."""

    def __init__(self, dim=8, window=3):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.window = window
        # A plain attribute (not a buffer), as rotary embeddings often keep it.
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, x):
        _, t, c = x.shape
        pos = torch.arange(t, device=x.device)
        causal = pos[:, None] >= pos[None, :]
        far = (pos[:, None] - pos[None, :]) >= self.window
        mask = (causal & torch.bitwise_not(far)).detach()
        freqs = torch.outer(pos.float(), self.inv_freq)
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
        q, k, v = self.qkv(x).split(c, dim=-1)

        def rotate(u):
            u1, u2 = u[..., : c // 2], u[..., c // 2:]
            return u * cos + torch.cat([-u2, u1], -1) * sin

        att = (rotate(q) @ rotate(k).transpose(-2, -1)) * (c ** -0.5)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        return self.out(att @ v)


class ConvNeXtBlock(nn.Module):
    """ConvNeXt's block (Liu et al. 2022, as torchvision writes it): a depthwise 7x7 convolution,
    channels-last LayerNorm through permutes, an inverted MLP with GELU, a layer scale, and
    stochastic depth in "row" mode — torch.empty([B, 1, 1, 1]).bernoulli_(survival) / survival,
    the empty() folded at import and the draw made every step; then a mean and a linear head."""

    def __init__(self, channels=3, dim=8, classes=10, drop=0.25):
        super().__init__()
        self.stem = nn.Conv2d(channels, dim, 2, stride=2)
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.layer_scale = nn.Parameter(torch.full((dim, 1, 1), 0.5))
        self.survival = 1.0 - drop
        self.head = nn.Linear(dim, classes)

    def stochastic_depth(self, x):
        if not self.training:
            return x
        noise = torch.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
        noise = noise.bernoulli_(self.survival)
        noise.div_(self.survival)
        return x * noise

    def forward(self, x):
        x = self.stem(x)
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(nn.functional.gelu(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
        x = x + self.stochastic_depth(self.layer_scale * y)
        return self.head(x.mean(dim=(2, 3)))


class SwinBlock(nn.Module):
    """Shifted-window attention (Liu et al. 2021, and v2's cosine attention, 2022) at toy size:
    pad to whole windows, roll by half a window, partition into windows through view/permute,
    attention with a relative position bias gathered from a table by a buffer of indices
    (aten::index), a mask for the shifted windows built by writing into slices of new_zeros()
    (folded at import), v2's qkv bias with its key third zeroed in place on a slice of a clone
    (slice_scatter) and F.normalize of q and k (vector_norm); stochastic depth; a mean and a
    linear head."""

    def __init__(self, dim=8, heads=2, window=4, shift=2, classes=10):
        super().__init__()
        self.window, self.shift, self.heads = window, shift, heads
        self.embed = nn.Conv2d(3, dim, 4, stride=4)  # 32x32 -> 8x8 patches (padded to 8: whole windows)
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
        self.bias_table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("bias_index", (rel[:, :, 0] * (2 * window - 1) + rel[:, :, 1]).flatten())
        self.head = nn.Linear(dim, classes)

    def attention(self, x):
        b, h, w, c = x.shape
        win, s = self.window, self.shift
        x = nn.functional.pad(x, (0, 0, 0, (win - w % win) % win, 0, (win - h % win) % win))
        _, ph, pw, _ = x.shape
        x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        x = x.view(b, ph // win, win, pw // win, win, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, win * win, c)
        qkv_bias = self.qkv.bias.clone()
        length = qkv_bias.numel() // 3
        qkv_bias[length:2 * length].zero_()
        qkv = nn.functional.linear(x, self.qkv.weight, qkv_bias)
        qkv = qkv.reshape(x.size(0), x.size(1), 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = nn.functional.normalize(q, dim=-1) @ nn.functional.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * torch.clamp(self.logit_scale, max=4.6052).exp()
        bias = self.bias_table[self.bias_index].view(win * win, win * win, -1).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        mask = x.new_zeros((ph, pw))
        count = 0
        for hs in ((0, -win), (-win, -s), (-s, None)):
            for ws in ((0, -win), (-win, -s), (-s, None)):
                mask[hs[0]:hs[1], ws[0]:ws[1]] = count
                count += 1
        mask = mask.view(ph // win, win, pw // win, win).permute(0, 2, 1, 3).reshape(-1, win * win)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0)
        attn = attn.view(-1, mask.size(0), self.heads, win * win, win * win) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, win * win, win * win).softmax(-1)
        x = (attn @ v).transpose(1, 2).reshape(-1, win * win, c)
        x = self.proj(x).view(b, ph // win, pw // win, win, win, c).permute(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
        x = torch.roll(x, shifts=(s, s), dims=(1, 2))
        return x[:, :h, :w, :].contiguous()

    def forward(self, x):
        x = self.embed(x).permute(0, 2, 3, 1)
        x = x + self.attention(self.norm(x))
        return self.head(x.mean(dim=(1, 2)))


class EinsumAttention(nn.Module):
    """Multi-head attention written with torch.einsum, as MaxViT's and many research codebases
    write it: projections "bnd,hde->bhne", scores "bhqe,bhke->bhqk", the weighted sum
    "bhqk,bhke->bhqe", the output "bhne,hed->bnd" (a two-label contraction); then a mean over
    tokens and a linear head."""

    def __init__(self, dim=8, heads=2, head_dim=4, classes=10):
        super().__init__()
        self.wq = nn.Parameter(torch.randn(heads, dim, head_dim) * 0.3)
        self.wk = nn.Parameter(torch.randn(heads, dim, head_dim) * 0.3)
        self.wv = nn.Parameter(torch.randn(heads, dim, head_dim) * 0.3)
        self.wo = nn.Parameter(torch.randn(heads, head_dim, dim) * 0.3)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        q = torch.einsum("bnd,hde->bhne", x, self.wq)
        k = torch.einsum("bnd,hde->bhne", x, self.wk)
        v = torch.einsum("...nd,hde->...hne", x, self.wv)
        att = torch.einsum("bhqe,bhke->bhqk", q, k).softmax(-1)
        y = torch.einsum("bhne,hed->bnd", torch.einsum("bhqk,bhke->bhqe", att, v), self.wo)
        return self.head(y.mean(1))


class RecurrentClassifier(nn.Module):
    """A recurrent sequence classifier as PyTorch's layers make it: a 2-layer batch-first
    nn.LSTM with dropout between its layers, a bidirectional nn.GRU over its outputs, and a
    linear head on the last step — aten::lstm and aten::gru, unrolled by the importer."""

    def __init__(self, features=8, hidden=12, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True, dropout=0.25)
        self.gru = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.head(y[:, -1])


class T5Encoder(nn.Module):
    """A T5-style encoder block (Raffel et al. 2020): RMS-style layer norm without mean or bias,
    attention without scaling whose bias comes from bucketed relative positions — log-spaced
    buckets computed from arange, abs, log, min and where, all folded at import, looked up in
    an embedding — and a ReLU feed-forward; a mean and a linear head."""

    def __init__(self, dim=16, heads=2, buckets=8, max_distance=16, classes=10):
        super().__init__()
        self.heads, self.buckets, self.max_distance = heads, buckets, max_distance
        self.ln1 = nn.Parameter(torch.ones(dim))
        self.ln2 = nn.Parameter(torch.ones(dim))
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.bias = nn.Embedding(buckets, heads)
        self.wi = nn.Linear(dim, 4 * dim, bias=False)
        self.wo = nn.Linear(4 * dim, dim, bias=False)
        self.head = nn.Linear(dim, classes)

    @staticmethod
    def norm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def bucket(self, relative):
        # Bidirectional: half the buckets for each sign, half of those exact, the rest log-spaced.
        n = self.buckets // 2
        out = (relative > 0).to(torch.long) * n
        distance = relative.abs()
        exact = n // 2
        log = exact + (torch.log(distance.float() / exact + 1e-6) / math.log(self.max_distance / exact)
                       * (n - exact)).to(torch.long)
        log = torch.min(log, torch.full_like(log, n - 1))
        return out + torch.where(distance < exact, distance, log)

    def forward(self, x):
        b, t, c = x.shape
        pos = torch.arange(t)
        bias = self.bias(self.bucket(pos[None, :] - pos[:, None])).permute(2, 0, 1).unsqueeze(0)
        h = self.norm(x, self.ln1)
        split = lambda u: u.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (split(self.q(h)) @ split(self.k(h)).transpose(-2, -1) + bias).softmax(-1)
        x = x + self.o((att @ split(self.v(h))).transpose(1, 2).reshape(b, t, c))
        x = x + self.wo(torch.relu(self.wi(self.norm(x, self.ln2))))
        return self.head(x.mean(1))


class BertEncoder(nn.Module):
    """A BERT-style encoder (Devlin et al. 2019): word, position (from arange, folded) and token
    type embeddings summed and layer-normed, one post-norm transformer layer with GELU, and the
    pooler (tanh of a linear on the first token) before the classifier."""

    def __init__(self, vocab=96, dim=16, heads=2, max_len=32, classes=10):
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_len, dim)
        self.token_type = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim)
        self.layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, activation="gelu",
                                                batch_first=True)
        self.pool = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, idx):
        t = idx.size(1)
        types = torch.zeros_like(idx)
        x = self.word(idx) + self.position(torch.arange(t)).unsqueeze(0) + self.token_type(types)
        x = self.layer(self.ln(x))
        return self.head(torch.tanh(self.pool(x[:, 0])))


class NeoXLM(nn.Module):
    """A GPT-NeoX / Pythia-style language model (Black et al. 2022): one block with the parallel
    residual x + attn(ln1(x)) + mlp(ln2(x)), a fused QKV projection laid out per head, rotary
    embeddings on the first quarter of each head's dimensions (rotary_pct = 0.25) from tables
    built with arange and outer, and a causal mask from tril(ones) — both folded at import;
    untied embedding and unembedding, logits out."""

    def __init__(self, vocab=96, dim=16, heads=2):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.rot = self.head_dim // 4 * 2 if self.head_dim >= 4 else 2
        self.embed = nn.Embedding(vocab, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.dense = nn.Linear(dim, dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)
        self.ln_f = nn.LayerNorm(dim)
        self.unembed = nn.Linear(dim, vocab, bias=False)

    def rotary(self, u, cos, sin):
        r, half = self.rot, self.rot // 2
        u_rot, u_pass = u[..., :r], u[..., r:]
        rotated = torch.cat([-u_rot[..., half:], u_rot[..., :half]], -1)
        return torch.cat([u_rot * cos + rotated * sin, u_pass], -1)

    def forward(self, idx):
        b, t = idx.shape
        x = self.embed(idx)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / self.rot))
        freqs = torch.outer(torch.arange(t).float(), inv_freq)
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos(), emb.sin()
        qkv = self.qkv(self.ln1(x)).view(b, t, self.heads, 3 * self.head_dim).permute(0, 2, 1, 3)
        q, k, v = qkv.split(self.head_dim, dim=-1)
        q, k = self.rotary(q, cos, sin), self.rotary(k, cos, sin)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        attn = self.dense((att @ v).transpose(1, 2).reshape(b, t, -1))
        mlp = self.down(nn.functional.gelu(self.up(self.ln2(x))))
        x = x + attn + mlp
        return self.unembed(self.ln_f(x))


class VAE(nn.Module):
    """A variational autoencoder (Kingma and Welling 2014): an MLP encoder to a mean and a log
    variance, the reparameterisation z = mu + eps * exp(logvar / 2) with eps = randn_like (drawn
    every step), an MLP decoder with a sigmoid, and the negative ELBO — a summed squared
    reconstruction error and the Gaussian KL term, averaged over the batch — as its output."""

    def __init__(self, features=32, hidden=24, latent=4):
        super().__init__()
        self.enc = nn.Linear(features, hidden)
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec1 = nn.Linear(latent, hidden)
        self.dec2 = nn.Linear(hidden, features)

    def forward(self, x):
        h = torch.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        std = torch.exp(0.5 * logvar)
        z = mu + torch.randn_like(std) * std
        recon = torch.sigmoid(self.dec2(torch.relu(self.dec1(z))))
        reconstruction = ((recon - x) ** 2).sum(1).mean()
        kl = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)).mean()
        return reconstruction + kl


class TorchLayers(nn.Module):
    """PyTorch's own sequence layers as a user composes them: an nn.TransformerEncoder of two
    post-norm layers over the source, an nn.TransformerDecoder of two pre-norm layers over the
    target with the causal mask nn.Transformer.generate_square_subsequent_mask makes (-inf
    above the diagonal, folded at import) and cross-attention to the encoder's memory, then an
    nn.MultiheadAttention (batch-first, its averaged attention weights returned too) pooling the
    decoder's output with a learned query; a linear head on the pooled vector plus the mean
    attention weight."""

    def __init__(self, dim=16, heads=2, classes=10):
        super().__init__()
        enc = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, num_layers=2, enable_nested_tensor=False)
        dec = nn.TransformerDecoderLayer(dim, heads, 2 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(dec, num_layers=2, norm=nn.LayerNorm(dim))
        self.query = nn.Parameter(torch.randn(1, 1, dim))
        self.pool = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.head = nn.Linear(dim, classes)

    def forward(self, src, tgt):
        memory = self.encoder(src)
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        out = self.decoder(tgt, memory, tgt_mask=mask)
        pooled, weights = self.pool(self.query.expand(out.size(0), -1, -1), out, out)
        return self.head(pooled.squeeze(1)) + weights.mean()


class SignalOps(nn.Module):
    """A scripted 1-D signal model that reaches the aten ops the traced models do not:
    torch.jit.script keeps conv1d / conv_transpose1d / instance_norm / avg_pool1d /
    adaptive_avg_pool1d as such (a trace makes _convolution), and the activations and
    selections are called as PyTorch's functional API spells them — elu, selu, celu,
    softplus, glu, minimum/maximum, a min over a dim with its indices, sort, cumsum, flip,
    unbind, argmin, logical ops on masks."""

    def __init__(self, channels: int = 4, classes: int = 5):
        super().__init__()
        self.conv = nn.Conv1d(2, 2 * channels, 3, padding=1)
        self.norm = nn.InstanceNorm1d(channels, affine=True)
        self.up = nn.ConvTranspose1d(channels, channels, 4, stride=2, padding=1)
        self.head = nn.Linear(3 * channels, classes)

    def forward(self, x):
        h = F.glu(self.conv(x), dim=1)                      # [B, C, L]
        h = F.elu(self.norm(h), alpha=0.5)
        h = F.selu(self.up(h)) + F.celu(h.repeat_interleave(2, dim=2), alpha=2.0)  # [B, C, 2L]
        h = F.avg_pool1d(F.softplus(h, beta=2.0), 2)        # [B, C, L]
        lo, idx = torch.min(h, dim=2, keepdim=True)
        s, _ = torch.sort(h, dim=2, descending=True)
        c = torch.cumsum(torch.flip(s, [2]), dim=2) / h.size(2)
        mask = torch.logical_and(h > lo, ~(h > c)) | (idx.float() < 1.0)
        h = torch.where(mask, torch.maximum(h, c), torch.minimum(h, lo))
        parts = torch.unbind(F.adaptive_avg_pool1d(h, 3), dim=2)
        feat = torch.cat([p for p in parts], dim=1)
        return self.head(feat) + torch.argmin(feat, dim=1, keepdim=True).float()


class GenericOps(nn.Module):
    """Uses kthvalue x2, logcumsumexp x1, renorm x1 (plus a Linear so it has parameters): ops with
    no hand-written entry, which import by the generic ATen path."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        x = self.proj(x)
        median, _ = torch.kthvalue(x, 3, dim=-1, keepdim=True)
        y = torch.logcumsumexp(x - median, dim=-1)
        y = torch.renorm(y, p=2, dim=0, maxnorm=1.0)
        low, _ = torch.kthvalue(y, 2, dim=0)
        return y + low


# What we expect in GenericOps's inlined graph (make_models.py checks this).
GENERIC_OPS = {"aten::kthvalue": 2, "aten::logcumsumexp": 1, "aten::renorm": 1}


class Refused(nn.Module):
    """What even the generic path refuses: an output whose shape depends on the input's values
    (torch.nonzero), after a Linear."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        x = self.proj(x)
        rows = torch.nonzero(x > 0)[:, 0]
        return x.index_select(0, rows).sum()

"""Generative models written as their public reference code writes them, at toy size: a VQ-VAE
(zalandoresearch/pytorch-vq-vae), DCGAN (pytorch/examples), RealNVP (the affine-coupling flow of
senya-ashukha/real-nvp-pytorch), DiT (facebookresearch/DiT), NeRF (yenchenlin/nerf-pytorch) and
a Gumbel-softmax categorical VAE. make_models.py traces them in train mode."""
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- VQ-VAE
class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost):
        super().__init__()
        self._embedding_dim = embedding_dim
        self._num_embeddings = num_embeddings
        self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
        self._embedding.weight.data.uniform_(-1 / self._num_embeddings, 1 / self._num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs):
        # convert inputs from BCHW -> BHWC
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self._embedding_dim)
        distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                     + torch.sum(self._embedding.weight ** 2, dim=1)
                     - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)
        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs.detach())
        loss = q_latent_loss + self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings


class Residual(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
        super().__init__()
        self._block = nn.Sequential(
            nn.ReLU(True),
            nn.Conv2d(in_channels, num_residual_hiddens, kernel_size=3, stride=1, padding=1, bias=False),
            nn.ReLU(True),
            nn.Conv2d(num_residual_hiddens, num_hiddens, kernel_size=1, stride=1, bias=False))

    def forward(self, x):
        return x + self._block(x)


class ResidualStack(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_layers, num_residual_hiddens):
        super().__init__()
        self._layers = nn.ModuleList([Residual(in_channels, num_hiddens, num_residual_hiddens)
                                      for _ in range(num_residual_layers)])

    def forward(self, x):
        for layer in self._layers:
            x = layer(x)
        return F.relu(x)


class VQVAE(nn.Module):
    """VQ-VAE (van den Oord et al. 2017) as zalandoresearch/pytorch-vq-vae's notebook writes it,
    images [B, 3, 16, 16] -> the scalar training loss recon_error + vq_loss. Encoder: two
    Conv2d(4, stride 2) + ReLU, Conv2d(3), a residual stack (ReLU, 3x3, ReLU, 1x1, + x; final
    F.relu); a 1x1 pre-VQ conv; the VectorQuantizer: BCHW -> BHWC permute().contiguous(), view,
    squared distances sum(x^2) + sum(e^2) - 2 x e^T, argmin, one-hot encodings by
    zeros(...).scatter_(1, idx, 1), quantized = encodings @ codebook, the codebook loss
    F.mse_loss(quantized, inputs.detach()) + commitment 0.25 * F.mse_loss(quantized.detach(),
    inputs), the straight-through estimator inputs + (quantized - inputs).detach() and the
    perplexity exp(-sum(p log(p + 1e-10))) (computed, unused by the loss, as in the notebook);
    decoder: Conv2d(3), residual stack, two ConvTranspose2d(4, stride 2); recon_error =
    F.mse_loss(recon, x) / data_variance."""

    def __init__(self, num_hiddens=16, num_residual_layers=1, num_residual_hiddens=8, num_embeddings=16,
                 embedding_dim=4, commitment_cost=0.25, data_variance=0.06327):
        super().__init__()
        self.data_variance = data_variance
        self._encoder = nn.Sequential(
            nn.Conv2d(3, num_hiddens // 2, kernel_size=4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(num_hiddens // 2, num_hiddens, kernel_size=4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(num_hiddens, num_hiddens, kernel_size=3, stride=1, padding=1),
            ResidualStack(num_hiddens, num_hiddens, num_residual_layers, num_residual_hiddens))
        self._pre_vq_conv = nn.Conv2d(num_hiddens, embedding_dim, kernel_size=1, stride=1)
        self._vq_vae = VectorQuantizer(num_embeddings, embedding_dim, commitment_cost)
        self._decoder = nn.Sequential(
            nn.Conv2d(embedding_dim, num_hiddens, kernel_size=3, stride=1, padding=1),
            ResidualStack(num_hiddens, num_hiddens, num_residual_layers, num_residual_hiddens),
            nn.ConvTranspose2d(num_hiddens, num_hiddens // 2, kernel_size=4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(num_hiddens // 2, 3, kernel_size=4, stride=2, padding=1))

    def forward(self, x):
        z = self._pre_vq_conv(self._encoder(x))
        vq_loss, quantized, perplexity, _ = self._vq_vae(z)
        x_recon = self._decoder(quantized)
        recon_error = F.mse_loss(x_recon, x) / self.data_variance
        return recon_error + vq_loss


# ---------------------------------------------------------------- DCGAN
def dcgan_weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class DCGAN(nn.Module):
    """DCGAN (Radford et al. 2016) as pytorch/examples/dcgan writes its networks and its step,
    forward(noise [B, 16, 1, 1], real [B, 3, 16, 16] in [-1, 1]) -> errD_real + errD_fake + errG.
    Generator: ConvTranspose2d(4, 1, 0) 1 -> 4, ConvTranspose2d(4, 2, 1) twice -> 16, BatchNorm2d
    + ReLU(True) between, Tanh; discriminator: Conv2d(4, 2, 1) + LeakyReLU(0.2, inplace=True),
    Conv2d + BatchNorm2d + LeakyReLU, Conv2d(4, 1, 0) to 1x1, Sigmoid, view(-1, 1).squeeze(1);
    weights_init (normal_(0, 0.02), BN normal_(1, 0.02)); nn.BCELoss against labels made with
    torch.full((B,), 1.0 or 0.0); D sees the real batch, fake.detach() and fake again for the
    generator loss. The example alternates two optimizers; here the three losses are summed into
    one step (so errG's gradient also reaches D)."""

    def __init__(self, nz=16, ngf=8, ndf=8, nc=3):
        super().__init__()
        self.netG = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())
        self.netD = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
        self.apply(dcgan_weights_init)
        self.criterion = nn.BCELoss()
        self.real_label, self.fake_label = 1.0, 0.0

    def discriminate(self, x):
        return self.netD(x).view(-1, 1).squeeze(1)

    def forward(self, noise, real):
        batch_size = real.size(0)
        label = torch.full((batch_size,), self.real_label, dtype=real.dtype, device=real.device)
        errD_real = self.criterion(self.discriminate(real), label)
        fake = self.netG(noise)
        label = torch.full((batch_size,), self.fake_label, dtype=real.dtype, device=real.device)
        errD_fake = self.criterion(self.discriminate(fake.detach()), label)
        label = torch.full((batch_size,), self.real_label, dtype=real.dtype, device=real.device)
        errG = self.criterion(self.discriminate(fake), label)
        return errD_real + errD_fake + errG


# ---------------------------------------------------------------- RealNVP
class RealNVP(nn.Module):
    """RealNVP (Dinh et al. 2017), the affine-coupling flow as senya-ashukha/real-nvp-pytorch
    writes it, x [B, 16] -> the scalar negative log-likelihood -log_prob(x).mean(). Four
    couplings with alternating checkerboard masks (arange % 2, flipped each layer); each has a
    scale net (Linear-LeakyReLU-Linear-LeakyReLU-Linear-Tanh) and a translation net (the same
    without Tanh) on the masked input; the inverse pass f(x) runs the couplings in reversed order,
    z = (1 - m) * (z - t) * exp(-s) + m * z, and subtracts s.sum(1) into log_det_J, which starts
    as x.new_zeros(B); the prior is a standard normal whose log-density is written out
    (-0.5 * z^2 - 0.5 * log(2 pi), summed). The reference keeps the masks as
    nn.Parameter(requires_grad=False); here they are a buffer."""

    def __init__(self, dim=16, hidden=16, layers=4):
        super().__init__()
        mask = (torch.arange(dim) % 2).float()
        self.register_buffer("mask", torch.stack([mask if i % 2 == 0 else 1 - mask for i in range(layers)]))

        def nets():
            return nn.Sequential(nn.Linear(dim, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden), nn.LeakyReLU(),
                                 nn.Linear(hidden, dim), nn.Tanh())

        def nett():
            return nn.Sequential(nn.Linear(dim, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden), nn.LeakyReLU(),
                                 nn.Linear(hidden, dim))

        self.t = nn.ModuleList([nett() for _ in range(layers)])
        self.s = nn.ModuleList([nets() for _ in range(layers)])

    def f(self, x):
        log_det_J, z = x.new_zeros(x.shape[0]), x
        for i in reversed(range(len(self.t))):
            z_ = self.mask[i] * z
            s = self.s[i](z_) * (1 - self.mask[i])
            t = self.t[i](z_) * (1 - self.mask[i])
            z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
            log_det_J -= s.sum(dim=1)
        return z, log_det_J

    def prior_log_prob(self, z):
        return (-0.5 * z ** 2 - 0.5 * math.log(2 * math.pi)).sum(dim=1)

    def log_prob(self, x):
        z, logp = self.f(x)
        return self.prior_log_prob(z) + logp

    def forward(self, x):
        return -self.log_prob(x).mean()


# ---------------------------------------------------------------- DiT
def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size, bias=True), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size, bias=True))
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
                          ).to(device=t.device)
        args = t[:, None].float() * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
        return embedding

    def forward(self, t):
        return self.mlp(self.timestep_embedding(t, self.frequency_embedding_size))


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden_size, dropout_prob):
        super().__init__()
        use_cfg_embedding = dropout_prob > 0
        self.embedding_table = nn.Embedding(num_classes + use_cfg_embedding, hidden_size)
        self.num_classes = num_classes
        self.dropout_prob = dropout_prob

    def token_drop(self, labels, force_drop_ids=None):
        if force_drop_ids is None:
            drop_ids = torch.rand(labels.shape[0], device=labels.device) < self.dropout_prob
        else:
            drop_ids = force_drop_ids == 1
        labels = torch.where(drop_ids, self.num_classes, labels)
        return labels

    def forward(self, labels, train, force_drop_ids=None):
        use_dropout = self.dropout_prob > 0
        if (train and use_dropout) or (force_drop_ids is not None):
            labels = self.token_drop(labels, force_drop_ids)
        return self.embedding_table(labels)


class DiTAttention(nn.Module):
    """timm's Attention (the non-fused path)."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.q_norm, self.k_norm = nn.Identity(), nn.Identity()
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        x = attn @ v
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class DiTBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = DiTAttention(hidden_size, num_heads)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        mlp_hidden_dim = int(hidden_size * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, mlp_hidden_dim), nn.GELU(approximate="tanh"),
                                 nn.Dropout(0.0), nn.Linear(mlp_hidden_dim, hidden_size), nn.Dropout(0.0))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size, bias=True))

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        x = x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))
        return x


class FinalLayer(nn.Module):
    def __init__(self, hidden_size, patch_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size, bias=True))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        x = modulate(self.norm_final(x), shift, scale)
        return self.linear(x)


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    omega = torch.arange(embed_dim // 2, dtype=torch.float64) / (embed_dim / 2.0)
    omega = 1.0 / 10000 ** omega
    out = torch.einsum("m,d->md", pos.reshape(-1), omega)
    return torch.cat([torch.sin(out), torch.cos(out)], dim=1)


def get_2d_sincos_pos_embed(embed_dim, grid_size):
    grid_h = torch.arange(grid_size, dtype=torch.float64)
    grid_w = torch.arange(grid_size, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(grid_w, grid_h, indexing="xy"), dim=0).reshape(2, 1, grid_size, grid_size)
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])
    return torch.cat([emb_h, emb_w], dim=1)


class DiT(nn.Module):
    """DiT (Peebles and Xie 2023) as facebookresearch/DiT models.py writes it, forward(x
    [B, 4, 8, 8] latents, t [B] int64 timesteps in 0..999, y [B] int64 class labels in 0..9)
    -> [B, 8, 8, 8] (predicted noise and variance, learn_sigma; an output for MSE). timm
    PatchEmbed (Conv2d, patch 2, flatten(2).transpose(1, 2)) + a fixed 2-D sin-cos pos_embed
    (a buffer here; the reference keeps a frozen nn.Parameter); TimestepEmbedder (sinusoidal
    embedding of t[:, None].float(), Linear-SiLU-Linear); LabelEmbedder with classifier-free
    guidance label dropout drawn in forward — torch.rand(B) < 0.1, torch.where(drop, num_classes,
    labels) into an extra null-class row; c = t + y; 2 DiTBlocks with adaLN-Zero modulation
    (SiLU, Linear to 6 * hidden, chunk(6), x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1),
    gated residuals), LayerNorm without affine, timm Attention (qkv reshape/permute, unbind(0),
    q * scale, softmax) and a GELU(approximate="tanh") MLP; the final adaLN layer and unpatchify by
    reshape + torch.einsum("nhwpqc->nchpwq") + reshape. The reference's zero initialisation of
    the adaLN and output layers is left out, so that every parameter gets a gradient."""

    def __init__(self, input_size=8, patch_size=2, in_channels=4, hidden_size=16, depth=2, num_heads=2,
                 mlp_ratio=4.0, class_dropout_prob=0.1, num_classes=10, learn_sigma=True):
        super().__init__()
        self.learn_sigma = learn_sigma
        self.in_channels = in_channels
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.patch_size = patch_size
        self.num_heads = num_heads
        self.x_embedder = nn.Conv2d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size, bias=True)
        self.t_embedder = TimestepEmbedder(hidden_size)
        self.y_embedder = LabelEmbedder(num_classes, hidden_size, class_dropout_prob)
        grid = input_size // patch_size
        self.register_buffer("pos_embed", get_2d_sincos_pos_embed(hidden_size, grid).float().unsqueeze(0))
        self.blocks = nn.ModuleList([DiTBlock(hidden_size, num_heads, mlp_ratio=mlp_ratio) for _ in range(depth)])
        self.final_layer = FinalLayer(hidden_size, patch_size, self.out_channels)

    def unpatchify(self, x):
        c = self.out_channels
        p = self.patch_size
        h = w = int(x.shape[1] ** 0.5)
        x = x.reshape(shape=(x.shape[0], h, w, p, p, c))
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(shape=(x.shape[0], c, h * p, h * p))

    def forward(self, x, t, y):
        x = self.x_embedder(x).flatten(2).transpose(1, 2) + self.pos_embed
        t = self.t_embedder(t)
        y = self.y_embedder(y, self.training)
        c = t + y
        for block in self.blocks:
            x = block(x, c)
        x = self.final_layer(x, c)
        return self.unpatchify(x)


# ---------------------------------------------------------------- NeRF
class Embedder:
    """nerf-pytorch's positional encoding: the input, then sin and cos of x * 2^k."""

    def __init__(self, input_dims, multires):
        self.embed_fns = [lambda x: x]
        self.out_dim = input_dims
        max_freq, n_freqs = multires - 1, multires
        freq_bands = 2.0 ** torch.linspace(0.0, max_freq, steps=n_freqs)
        for freq in freq_bands:
            for p_fn in [torch.sin, torch.cos]:
                self.embed_fns.append(lambda x, p_fn=p_fn, freq=freq: p_fn(x * freq))
                self.out_dim += input_dims

    def embed(self, inputs):
        return torch.cat([fn(inputs) for fn in self.embed_fns], -1)


class NeRFMLP(nn.Module):
    def __init__(self, D=4, W=16, input_ch=27, input_ch_views=15, skips=(2,)):
        super().__init__()
        self.input_ch, self.input_ch_views, self.skips = input_ch, input_ch_views, list(skips)
        self.pts_linears = nn.ModuleList([nn.Linear(input_ch, W)] + [
            nn.Linear(W, W) if i not in self.skips else nn.Linear(W + input_ch, W) for i in range(D - 1)])
        self.views_linears = nn.ModuleList([nn.Linear(input_ch_views + W, W // 2)])
        self.feature_linear = nn.Linear(W, W)
        self.alpha_linear = nn.Linear(W, 1)
        self.rgb_linear = nn.Linear(W // 2, 3)

    def forward(self, x):
        input_pts, input_views = torch.split(x, [self.input_ch, self.input_ch_views], dim=-1)
        h = input_pts
        for i, l in enumerate(self.pts_linears):
            h = self.pts_linears[i](h)
            h = F.relu(h)
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
        alpha = self.alpha_linear(h)
        feature = self.feature_linear(h)
        h = torch.cat([feature, input_views], -1)
        for i, l in enumerate(self.views_linears):
            h = self.views_linears[i](h)
            h = F.relu(h)
        rgb = self.rgb_linear(h)
        return torch.cat([rgb, alpha], -1)


class NeRF(nn.Module):
    """NeRF (Mildenhall et al. 2020) as yenchenlin/nerf-pytorch's run_nerf.py renders a batch of
    rays (coarse network only, no hierarchical resampling), forward(rays_o [B, 3], rays_d [B, 3])
    -> rgb_map [B, 3] (an output for MSE against pixel colours). viewdirs = rays_d / norm;
    t_vals = torch.linspace(0, 1, 8), z_vals between near 2 and far 6, expanded; stratified
    sampling drawn in forward (perturb = 1): mids, upper/lower by cat, t_rand = torch.rand(shape);
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]; run_network:
    positional encodings (the input plus sin/cos of x * 2^k, k < 4 for points, < 2 for view
    directions; built from 2.0 ** torch.linspace) of the flattened points and the expanded view
    directions, batchify in chunks (one chunk here), the NeRF MLP (4 ReLU Linears with the input
    concatenated back after layer 2 (skips), alpha and feature heads, a view-dependent branch,
    rgb); raw2outputs: dists by differences with torch.Tensor([1e10]) appended, times
    torch.norm(rays_d[..., None, :], dim=-1), sigmoid colours, raw_noise_std = 1 noise
    torch.randn(raw[..., 3].shape) on the density, alpha = 1 - exp(-relu(sigma) * dists),
    transmittance weights = alpha * torch.cumprod(cat([ones, 1 - alpha + 1e-10]), -1)[:, :-1],
    rgb_map = sum(weights[..., None] * rgb, -2), and a white background 1 - acc_map added."""

    def __init__(self, n_samples=8, multires=4, multires_views=2, D=4, W=16, near=2.0, far=6.0,
                 perturb=1.0, raw_noise_std=1.0, netchunk=1024 * 64):
        super().__init__()
        self.n_samples, self.near, self.far = n_samples, near, far
        self.perturb, self.raw_noise_std, self.netchunk = perturb, raw_noise_std, netchunk
        self.embed_fn = Embedder(3, multires)
        self.embeddirs_fn = Embedder(3, multires_views)
        self.network_fn = NeRFMLP(D, W, self.embed_fn.out_dim, self.embeddirs_fn.out_dim, skips=(2,))

    def batchify(self, inputs):
        return torch.cat([self.network_fn(inputs[i:i + self.netchunk]) for i in range(0, inputs.shape[0], self.netchunk)], 0)

    def run_network(self, inputs, viewdirs):
        inputs_flat = torch.reshape(inputs, [-1, inputs.shape[-1]])
        embedded = self.embed_fn.embed(inputs_flat)
        input_dirs = viewdirs[:, None].expand(inputs.shape)
        input_dirs_flat = torch.reshape(input_dirs, [-1, input_dirs.shape[-1]])
        embedded_dirs = self.embeddirs_fn.embed(input_dirs_flat)
        embedded = torch.cat([embedded, embedded_dirs], -1)
        outputs_flat = self.batchify(embedded)
        return torch.reshape(outputs_flat, list(inputs.shape[:-1]) + [outputs_flat.shape[-1]])

    def raw2outputs(self, raw, z_vals, rays_d):
        def raw2alpha(raw, dists, act_fn=F.relu):
            return 1.0 - torch.exp(-act_fn(raw) * dists)
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
        dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
        rgb = torch.sigmoid(raw[..., :3])
        noise = 0.0
        if self.raw_noise_std > 0.0:
            noise = torch.randn(raw[..., 3].shape) * self.raw_noise_std
        alpha = raw2alpha(raw[..., 3] + noise, dists)
        weights = alpha * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
        rgb_map = torch.sum(weights[..., None] * rgb, -2)
        acc_map = torch.sum(weights, -1)
        return rgb_map + (1.0 - acc_map[..., None])  # white_bkgd

    def forward(self, rays_o, rays_d):
        viewdirs = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
        n_rays = rays_o.shape[0]
        t_vals = torch.linspace(0.0, 1.0, steps=self.n_samples)
        z_vals = self.near * (1.0 - t_vals) + self.far * t_vals
        z_vals = z_vals.expand([n_rays, self.n_samples])
        if self.perturb > 0.0:
            mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
            upper = torch.cat([mids, z_vals[..., -1:]], -1)
            lower = torch.cat([z_vals[..., :1], mids], -1)
            t_rand = torch.rand(z_vals.shape)
            z_vals = lower + (upper - lower) * t_rand
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = self.run_network(pts, viewdirs)
        return self.raw2outputs(raw, z_vals, rays_d)


# ---------------------------------------------------------------- Gumbel-softmax VAE
class GumbelSoftmaxVAE(nn.Module):
    """A categorical VAE trained with the straight-through Gumbel-softmax (Jang et al. 2017;
    ericjang/gumbel-softmax, as its PyTorch ports write it), x [B, 32] in [0, 1] -> the scalar
    loss. Encoder MLP (ReLU) to logits viewed as [B, 4 latents, 8 categories]; z =
    F.gumbel_softmax(q_y, tau=1.0, hard=True) — Gumbel noise drawn in forward
    (-empty_like().exponential_().log()), softmax, then the hard one-hot by max indices,
    zeros_like().scatter_ and y_hard - y_soft.detach() + y_soft; decoder MLP with a sigmoid;
    loss = F.binary_cross_entropy(recon, x, reduction="sum") / B + the KL to the uniform prior
    sum(q_y * log(q_y * K + 1e-20)) averaged over the batch, with q_y = softmax(logits)."""

    def __init__(self, features=32, hidden=24, latent_dim=4, categorical_dim=8, temp=1.0):
        super().__init__()
        self.latent_dim, self.categorical_dim, self.temp = latent_dim, categorical_dim, temp
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, latent_dim * categorical_dim)
        self.fc3 = nn.Linear(latent_dim * categorical_dim, hidden)
        self.fc4 = nn.Linear(hidden, features)

    def forward(self, x):
        q = self.fc2(F.relu(self.fc1(x)))
        q_y = q.view(q.size(0), self.latent_dim, self.categorical_dim)
        z = F.gumbel_softmax(q_y, tau=self.temp, hard=True).view(-1, self.latent_dim * self.categorical_dim)
        recon_x = torch.sigmoid(self.fc4(F.relu(self.fc3(z))))
        qy = F.softmax(q_y, dim=-1).reshape(*q.size())
        bce = F.binary_cross_entropy(recon_x, x, reduction="sum") / x.shape[0]
        log_ratio = torch.log(qy * self.categorical_dim + 1e-20)
        kld = torch.sum(qy * log_ratio, dim=-1).mean()
        return bce + kld

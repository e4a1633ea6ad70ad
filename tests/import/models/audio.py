"""Audio models written as their public reference code writes them, at toy size: Whisper's
encoder (openai/whisper), WaveNet (r9y9/wavenet_vocoder with torchaudio's mu-law encoding), a
Conformer (torchaudio.models.Conformer) and the HiFi-GAN generator (jik876/hifi-gan).
make_models.py traces them in train mode."""
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- Whisper
def sinusoids(length, channels, max_timescale=10000):
    """Whisper's sinusoids for positional embedding."""
    log_timescale_increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


class WhisperLayerNorm(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


class WhisperLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))


class WhisperConv1d(nn.Conv1d):
    def _conv_forward(self, x, weight, bias):
        return super()._conv_forward(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))


class WhisperMultiHeadAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.n_head = n_head
        self.query = WhisperLinear(n_state, n_state)
        self.key = WhisperLinear(n_state, n_state, bias=False)
        self.value = WhisperLinear(n_state, n_state)
        self.out = WhisperLinear(n_state, n_state)

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)
        wv, qk = self.qkv_attention(q, k, v)
        return self.out(wv), qk

    def qkv_attention(self, q, k, v):
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3) * scale
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 3, 1) * scale
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        qk = q @ k
        qk = qk.float()
        w = F.softmax(qk, dim=-1).to(q.dtype)
        return (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2), qk.detach()


class WhisperResidualAttentionBlock(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.attn = WhisperMultiHeadAttention(n_state, n_head)
        self.attn_ln = WhisperLayerNorm(n_state)
        n_mlp = n_state * 4
        self.mlp = nn.Sequential(WhisperLinear(n_state, n_mlp), nn.GELU(), WhisperLinear(n_mlp, n_state))
        self.mlp_ln = WhisperLayerNorm(n_state)

    def forward(self, x):
        x = x + self.attn(self.attn_ln(x))[0]
        x = x + self.mlp(self.mlp_ln(x))
        return x


class WhisperEncoder(nn.Module):
    """Whisper's AudioEncoder (Radford et al. 2022, openai/whisper model.py) on a log-mel
    spectrogram [B, 16 mels, 32 frames], with a linear classifier on the mean over time (as
    audio-tagging / language-ID fine-tunes add): Conv1d(3, padding 1) and Conv1d(3, stride 2,
    padding 1) with GELU, permute(0, 2, 1), the fixed sinusoids positional_embedding buffer
    (exp, arange, sin, cos, cat) added and .to(x.dtype); 2 pre-norm residual attention blocks
    with Whisper's subclassed LayerNorm (x.float() then .type(x.dtype)), Linear (weight
    .to(x.dtype)) and Conv1d (_conv_forward override); attention with no key bias, q and k each
    scaled by head_dim ** -0.25 (view, permute(0, 2, 1, 3) and (0, 2, 3, 1)), softmax on
    qk.float(), the output permute(...).flatten(start_dim=2) and qk.detach() returned beside it;
    a 4x GELU MLP; ln_post -> logits [B, 10]."""

    def __init__(self, n_mels=16, n_ctx=16, n_state=16, n_head=2, n_layer=2, classes=10):
        super().__init__()
        self.conv1 = WhisperConv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = WhisperConv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_ctx, n_state))
        self.blocks = nn.ModuleList([WhisperResidualAttentionBlock(n_state, n_head) for _ in range(n_layer)])
        self.ln_post = WhisperLayerNorm(n_state)
        self.head = nn.Linear(n_state, classes)

    def forward(self, mel):
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x))
        x = x.permute(0, 2, 1)
        x = (x + self.positional_embedding).to(x.dtype)
        for block in self.blocks:
            x = block(x)
        x = self.ln_post(x)
        return self.head(x.mean(dim=1))


# ---------------------------------------------------------------- WaveNet
def mu_law_encoding(x, quantization_channels):
    """torchaudio.functional.mu_law_encoding."""
    mu = quantization_channels - 1.0
    if not x.is_floating_point():
        x = x.to(torch.float)
    mu = torch.tensor(mu, dtype=x.dtype)
    x_mu = torch.sign(x) * torch.log1p(mu * torch.abs(x)) / torch.log1p(mu)
    x_mu = ((x_mu + 1) / 2 * mu + 0.5).to(torch.int64)
    return x_mu


class ResidualConv1dGLU(nn.Module):
    """wavenet_vocoder's residual layer: a causal dilated conv (left pad), a gated tanh * sigmoid
    activation of its two halves, 1x1 convs to the residual and skip paths."""

    def __init__(self, residual_channels, gate_channels, kernel_size, skip_out_channels, dilation, dropout=0.05):
        super().__init__()
        self.dropout = dropout
        self.padding = (kernel_size - 1) * dilation
        self.conv = nn.Conv1d(residual_channels, gate_channels, kernel_size, dilation=dilation)
        gate_out_channels = gate_channels // 2
        self.conv1x1_out = nn.Conv1d(gate_out_channels, residual_channels, 1)
        self.conv1x1_skip = nn.Conv1d(gate_out_channels, skip_out_channels, 1)

    def forward(self, x):
        residual = x
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.conv(F.pad(x, (self.padding, 0)))
        splitdim = 1
        a, b = x.split(x.size(splitdim) // 2, dim=splitdim)
        x = torch.tanh(a) * torch.sigmoid(b)
        s = self.conv1x1_skip(x)
        x = self.conv1x1_out(x)
        x = (x + residual) * math.sqrt(0.5)
        return x, s


class WaveNet(nn.Module):
    """WaveNet (van den Oord et al. 2016) as r9y9/wavenet_vocoder writes it, on a waveform
    [B, 1, 64] in [-1, 1]: clamp to [-1, 1] (the data pipeline's guarantee, made explicit so that
    any input works), torchaudio's mu_law_encoding (sign, log1p, abs, .to(int64)) to 16
    levels, F.one_hot(...).transpose(1, 2).float() as the input; a first 1x1 conv; 4 residual
    layers with dilations 1, 2, 4, 8 — F.pad on the left for causality, dropout, a dilated conv
    whose output is split in two halves (x.split(C // 2, dim=1)) for the gated tanh * sigmoid,
    1x1 convs to the skip and residual paths, (x + residual) * sqrt(0.5); skips summed and scaled
    by sqrt(1 / layers); ReLU-1x1-ReLU-1x1 -> per-sample logits over the 16 mu-law classes,
    transposed to [B, 64, 16]. (As in the reference, the last layer's residual output is unused,
    so its conv1x1_out gets no gradient.)"""

    def __init__(self, out_channels=16, layers=4, residual_channels=8, gate_channels=16, skip_out_channels=8,
                 kernel_size=2):
        super().__init__()
        self.out_channels = out_channels
        self.first_conv = nn.Conv1d(out_channels, residual_channels, 1)
        self.conv_layers = nn.ModuleList([ResidualConv1dGLU(residual_channels, gate_channels, kernel_size,
                                                            skip_out_channels, 2 ** layer) for layer in range(layers)])
        self.last_conv_layers = nn.Sequential(nn.ReLU(inplace=True), nn.Conv1d(skip_out_channels, skip_out_channels, 1),
                                              nn.ReLU(inplace=True), nn.Conv1d(skip_out_channels, out_channels, 1))

    def forward(self, audio):
        # Clipped to [-1, 1] first: the reference's data pipeline guarantees the range; here the
        # clip keeps the mu-law classes in 0..15 for any input (MAP feeds standard normals).
        q = mu_law_encoding(torch.clamp(audio[:, 0], -1.0, 1.0), self.out_channels)  # [B, T] int64
        x = F.one_hot(q, self.out_channels).transpose(1, 2).float()   # [B, C, T]
        x = self.first_conv(x)
        skips = 0
        for f in self.conv_layers:
            x, h = f(x)
            skips = skips + h
        skips = skips * math.sqrt(1.0 / len(self.conv_layers))
        x = self.last_conv_layers(skips)
        return x.transpose(1, 2)


# ---------------------------------------------------------------- Conformer
def _lengths_to_padding_mask(lengths, max_length):
    batch_size = lengths.shape[0]
    # torchaudio takes max_length = int(torch.max(lengths).item()), a data-dependent value; the
    # padded input's time size is used instead so that the trace does not bake it in.
    padding_mask = torch.arange(max_length, device=lengths.device, dtype=lengths.dtype).expand(
        batch_size, max_length) >= lengths.unsqueeze(1)
    return padding_mask


class _ConvolutionModule(nn.Module):
    def __init__(self, input_dim, num_channels, depthwise_kernel_size, dropout=0.1):
        super().__init__()
        self.layer_norm = nn.LayerNorm(input_dim)
        self.sequential = nn.Sequential(
            nn.Conv1d(input_dim, 2 * num_channels, 1, stride=1, padding=0),
            nn.GLU(dim=1),
            nn.Conv1d(num_channels, num_channels, depthwise_kernel_size, stride=1,
                      padding=(depthwise_kernel_size - 1) // 2, groups=num_channels),
            nn.BatchNorm1d(num_channels),
            nn.SiLU(),
            nn.Conv1d(num_channels, input_dim, kernel_size=1, stride=1, padding=0),
            nn.Dropout(dropout),
        )

    def forward(self, input):
        x = self.layer_norm(input)
        x = x.transpose(1, 2)
        x = self.sequential(x)
        return x.transpose(1, 2)


class _FeedForwardModule(nn.Module):
    def __init__(self, input_dim, hidden_dim, dropout=0.1):
        super().__init__()
        self.sequential = nn.Sequential(nn.LayerNorm(input_dim), nn.Linear(input_dim, hidden_dim, bias=True), nn.SiLU(),
                                        nn.Dropout(dropout), nn.Linear(hidden_dim, input_dim, bias=True), nn.Dropout(dropout))

    def forward(self, input):
        return self.sequential(input)


class ConformerLayer(nn.Module):
    def __init__(self, input_dim, ffn_dim, num_attention_heads, depthwise_conv_kernel_size, dropout=0.1):
        super().__init__()
        self.ffn1 = _FeedForwardModule(input_dim, ffn_dim, dropout=dropout)
        self.self_attn_layer_norm = nn.LayerNorm(input_dim)
        self.self_attn = nn.MultiheadAttention(input_dim, num_attention_heads, dropout=dropout)
        self.self_attn_dropout = nn.Dropout(dropout)
        self.conv_module = _ConvolutionModule(input_dim, input_dim, depthwise_conv_kernel_size, dropout)
        self.ffn2 = _FeedForwardModule(input_dim, ffn_dim, dropout=dropout)
        self.final_layer_norm = nn.LayerNorm(input_dim)

    def _apply_convolution(self, input):
        residual = input
        input = input.transpose(0, 1)
        input = self.conv_module(input)
        input = input.transpose(0, 1)
        return residual + input

    def forward(self, input, key_padding_mask):
        residual = input
        x = self.ffn1(input)
        x = x * 0.5 + residual
        residual = x
        x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=key_padding_mask, need_weights=False)
        x = self.self_attn_dropout(x)
        x = x + residual
        x = self._apply_convolution(x)
        residual = x
        x = self.ffn2(x)
        x = x * 0.5 + residual
        return self.final_layer_norm(x)


class Conformer(nn.Module):
    """A Conformer encoder (Gulati et al. 2020) as torchaudio.models.Conformer writes it, with a
    linear input projection and a per-frame classifier (CTC-style frame logits), forward(features
    [B, 32, 16], lengths [B] int64 in 1..32) -> logits [B, 32, 12]: the key padding mask from
    arange(T).expand(B, T) >= lengths.unsqueeze(1); sequence-first (transpose(0, 1)) ConformerLayers
    with the macaron half-step feed-forwards (LayerNorm, Linear, SiLU, dropout, Linear, dropout;
    x * 0.5 + residual), nn.MultiheadAttention with key_padding_mask, the convolution module
    (LayerNorm, transpose, pointwise Conv1d to 2C, GLU(dim=1), depthwise Conv1d(kernel 7,
    groups=C), BatchNorm1d, SiLU, pointwise Conv1d, dropout) and a final LayerNorm; 2 layers."""

    def __init__(self, input_dim=16, model_dim=16, ffn_dim=32, heads=2, layers=2, kernel=7, classes=12):
        super().__init__()
        self.input_linear = nn.Linear(input_dim, model_dim)
        self.conformer_layers = nn.ModuleList([ConformerLayer(model_dim, ffn_dim, heads, kernel) for _ in range(layers)])
        self.output_linear = nn.Linear(model_dim, classes)

    def forward(self, features, lengths):
        encoder_padding_mask = _lengths_to_padding_mask(lengths, features.size(1))
        x = self.input_linear(features).transpose(0, 1)
        for layer in self.conformer_layers:
            x = layer(x, encoder_padding_mask)
        return self.output_linear(x.transpose(0, 1))


# ---------------------------------------------------------------- HiFi-GAN
LRELU_SLOPE = 0.1


def get_padding(kernel_size, dilation=1):
    return int((kernel_size * dilation - dilation) / 2)


def init_weights(m, mean=0.0, std=0.01):
    if m.__class__.__name__.find("Conv") != -1:
        m.weight.data.normal_(mean, std)


class HiFiResBlock1(nn.Module):
    def __init__(self, channels, kernel_size=3, dilation=(1, 3)):
        super().__init__()
        weight_norm = nn.utils.weight_norm
        self.convs1 = nn.ModuleList([weight_norm(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d,
                                                           padding=get_padding(kernel_size, d))) for d in dilation])
        self.convs1.apply(init_weights)
        self.convs2 = nn.ModuleList([weight_norm(nn.Conv1d(channels, channels, kernel_size, 1, dilation=1,
                                                           padding=get_padding(kernel_size, 1))) for _ in dilation])
        self.convs2.apply(init_weights)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c1(xt)
            xt = F.leaky_relu(xt, LRELU_SLOPE)
            xt = c2(xt)
            x = xt + x
        return x


class HiFiGANGenerator(nn.Module):
    """HiFi-GAN's generator (Kong et al. 2020) as jik876/hifi-gan models.py writes it, mel
    [B, 16, 8] -> waveform [B, 1, 64] (an output for MSE, standing in for its mel-L1 + adversarial
    losses): every conv wrapped in nn.utils.weight_norm (weight_g/weight_v, aten::_weight_norm in
    forward; init_weights' normal_(0, 0.01) applied after weight_norm as the reference does, so it
    only touches the derived weight); conv_pre Conv1d(7); two upsampling
    stages of F.leaky_relu(0.1) and a weight-normed ConvTranspose1d (rates 4 and 2, kernels 8 and
    4, padding (k - u) // 2), each followed by the multi-receptive-field fusion — the sum of
    ResBlock1s with kernels 3 and 5 (dilations 1 and 3, leaky_relu before each conv, residual)
    accumulated in place (xs += ...) and divided by num_kernels; leaky_relu (slope 0.01),
    conv_post and tanh."""

    def __init__(self, n_mels=16, upsample_initial_channel=16, upsample_rates=(4, 2), upsample_kernel_sizes=(8, 4),
                 resblock_kernel_sizes=(3, 5), resblock_dilation_sizes=((1, 3), (1, 3))):
        super().__init__()
        weight_norm = nn.utils.weight_norm
        self.num_kernels = len(resblock_kernel_sizes)
        self.num_upsamples = len(upsample_rates)
        self.conv_pre = weight_norm(nn.Conv1d(n_mels, upsample_initial_channel, 7, 1, padding=3))
        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(upsample_rates, upsample_kernel_sizes)):
            self.ups.append(weight_norm(nn.ConvTranspose1d(upsample_initial_channel // (2 ** i),
                                                           upsample_initial_channel // (2 ** (i + 1)),
                                                           k, u, padding=(k - u) // 2)))
        self.resblocks = nn.ModuleList()
        for i in range(len(self.ups)):
            ch = upsample_initial_channel // (2 ** (i + 1))
            for k, d in zip(resblock_kernel_sizes, resblock_dilation_sizes):
                self.resblocks.append(HiFiResBlock1(ch, k, d))
        self.conv_post = weight_norm(nn.Conv1d(ch, 1, 7, 1, padding=3))
        self.ups.apply(init_weights)
        self.conv_post.apply(init_weights)

    def forward(self, x):
        x = self.conv_pre(x)
        for i in range(self.num_upsamples):
            x = F.leaky_relu(x, LRELU_SLOPE)
            x = self.ups[i](x)
            xs = None
            for j in range(self.num_kernels):
                if xs is None:
                    xs = self.resblocks[i * self.num_kernels + j](x)
                else:
                    xs += self.resblocks[i * self.num_kernels + j](x)
            x = xs / self.num_kernels
        x = F.leaky_relu(x)
        x = self.conv_post(x)
        return torch.tanh(x)

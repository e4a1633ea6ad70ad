"""Signal-processing / time-series models written as their public reference code writes them, at
toy size: a TCN (locuslab/TCN), SincNet (mravanelli/SincNet's SincConv_fast) and N-BEATS
(ElementAI/N-BEATS, interpretable stacks plus a generic block). make_models.py traces them in
train mode. (Named sigproc.py, not signal.py: on make_models.py's sys.path a signal.py would
shadow the standard library's signal module.)"""
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- TCN
class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super().__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
        super().__init__()
        weight_norm = nn.utils.weight_norm
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size, stride=stride, padding=padding,
                                           dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)
        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size, stride=stride, padding=padding,
                                           dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)
        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2):
        super().__init__()
        layers = []
        for i in range(len(num_channels)):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i - 1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size - 1) * dilation_size, dropout=dropout)]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    """A temporal convolutional network (Bai et al. 2018) as locuslab/TCN writes it (the
    sequential-MNIST model), on x [B, 1, 32] -> log-probabilities [B, 10]: 3 TemporalBlocks with
    dilations 1, 2, 4, each two nn.utils.weight_norm-ed Conv1d (aten::_weight_norm in forward;
    init_weights' normal_(0, 0.01) acts on the derived weight, as in the reference) with
    padding (k - 1) * d cut off on the right by Chomp1d (x[:, :, :-chomp].contiguous()), ReLU,
    Dropout, and a 1x1 downsample conv on the residual when the width changes; the last time step
    y[:, :, -1] through a Linear and F.log_softmax."""

    def __init__(self, input_size=1, num_channels=(8, 8, 8), kernel_size=3, dropout=0.1, output_size=10):
        super().__init__()
        self.tcn = TemporalConvNet(input_size, list(num_channels), kernel_size=kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)

    def forward(self, inputs):
        y1 = self.tcn(inputs)
        o = self.linear(y1[:, :, -1])
        return F.log_softmax(o, dim=1)


# ---------------------------------------------------------------- SincNet
class SincConv_fast(nn.Module):
    @staticmethod
    def to_mel(hz):
        return 2595 * math.log10(1 + hz / 700)

    @staticmethod
    def to_hz(mel):
        return 700 * (10 ** (mel / 2595) - 1)

    def __init__(self, out_channels, kernel_size, sample_rate=16000, stride=1, padding=0, dilation=1,
                 min_low_hz=50, min_band_hz=50):
        super().__init__()
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        if kernel_size % 2 == 0:  # forcing the filters to be odd (i.e. perfectly symmetric)
            self.kernel_size = self.kernel_size + 1
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.sample_rate, self.min_low_hz, self.min_band_hz = sample_rate, min_low_hz, min_band_hz
        # initialize filterbanks such that they are equally spaced in Mel scale
        low_hz = 30
        high_hz = self.sample_rate / 2 - (self.min_low_hz + self.min_band_hz)
        mel = torch.linspace(self.to_mel(low_hz), self.to_mel(high_hz), self.out_channels + 1, dtype=torch.float64)
        hz = 700 * (10 ** (mel / 2595) - 1)
        # filter lower frequency (out_channels, 1)
        self.low_hz_ = nn.Parameter(hz[:-1].float().view(-1, 1))
        # filter frequency band (out_channels, 1)
        self.band_hz_ = nn.Parameter((hz[1:] - hz[:-1]).float().view(-1, 1))
        # Hamming window (computing only half of the window)
        n_lin = torch.linspace(0, (self.kernel_size / 2) - 1, steps=int((self.kernel_size / 2)))
        self.window_ = 0.54 - 0.46 * torch.cos(2 * math.pi * n_lin / self.kernel_size)
        n = (self.kernel_size - 1) / 2.0
        self.n_ = 2 * math.pi * torch.arange(-n, 0).view(1, -1) / self.sample_rate  # due to symmetry

    def forward(self, waveforms):
        self.n_ = self.n_.to(waveforms.device)
        self.window_ = self.window_.to(waveforms.device)
        low = self.min_low_hz + torch.abs(self.low_hz_)
        high = torch.clamp(low + self.min_band_hz + torch.abs(self.band_hz_), self.min_low_hz, self.sample_rate / 2)
        band = (high - low)[:, 0]
        f_times_t_low = torch.matmul(low, self.n_)
        f_times_t_high = torch.matmul(high, self.n_)
        # Equivalent of Eq.4 of the reference paper, expanded to reduce the computation
        band_pass_left = ((torch.sin(f_times_t_high) - torch.sin(f_times_t_low)) / (self.n_ / 2)) * self.window_
        band_pass_center = 2 * band.view(-1, 1)
        band_pass_right = torch.flip(band_pass_left, dims=[1])
        band_pass = torch.cat([band_pass_left, band_pass_center, band_pass_right], dim=1)
        band_pass = band_pass / (2 * band[:, None])
        filters = band_pass.view(self.out_channels, 1, self.kernel_size)
        return F.conv1d(waveforms, filters, stride=self.stride, padding=self.padding, dilation=self.dilation,
                        bias=None, groups=1)


class SincLayerNorm(nn.Module):
    """SincNet's own LayerNorm: gamma * (x - mean) / (std + eps) + beta over the last dim."""

    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(features))
        self.beta = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.gamma * (x - mean) / (std + self.eps) + self.beta


class SincNet(nn.Module):
    """SincNet (Ravanelli and Bengio 2018) as mravanelli/SincNet's dnn_models.py writes it
    (SincConv_fast, the CNN front end and an MLP), waveform chunks [B, 128] -> speaker logits
    [B, 10]: x.view(B, 1, T); SincConv_fast with 8 band-pass filters of 17 taps whose low cut-off
    and band are learned (abs, clamp, matmul with the time axis n_, sin, a Hamming window
    computed with cos, torch.flip for the symmetric half, cat, divided by 2 * band, view to
    [C, 1, K], F.conv1d with no bias), then per layer abs (first only), F.max_pool1d, SincNet's
    LayerNorm (mean, x.std(-1, keepdim=True), over [C, L] parameters), LeakyReLU(0.2), Dropout; a
    second plain Conv1d layer; flatten; an MLP with LayerNorm and LeakyReLU; the class Linear.
    (The reference keeps the sinc filters as self.filters; here they are a local.)"""

    def __init__(self, wlen=128, sinc_filters=8, sinc_len=17, conv_filters=8, conv_len=5, pools=(4, 2),
                 fc=32, classes=10, fs=16000):
        super().__init__()
        self.ln0 = SincLayerNorm(wlen)
        self.conv = nn.ModuleList([SincConv_fast(sinc_filters, sinc_len, fs),
                                   nn.Conv1d(sinc_filters, conv_filters, conv_len)])
        self.pools = pools
        l1 = (wlen - sinc_len + 1) // pools[0]
        l2 = (l1 - conv_len + 1) // pools[1]
        self.ln = nn.ModuleList([SincLayerNorm([sinc_filters, l1]), SincLayerNorm([conv_filters, l2])])
        self.act = nn.ModuleList([nn.LeakyReLU(0.2), nn.LeakyReLU(0.2)])
        self.drop = nn.ModuleList([nn.Dropout(0.1), nn.Dropout(0.1)])
        self.out_dim = conv_filters * l2
        self.fc = nn.Linear(self.out_dim, fc)
        self.fc_ln = nn.LayerNorm(fc)
        self.fc_act = nn.LeakyReLU(0.2)
        self.head = nn.Linear(fc, classes)

    def forward(self, x):
        batch, seq_len = x.shape[0], x.shape[1]
        x = self.ln0(x)
        x = x.view(batch, 1, seq_len)
        for i in range(len(self.conv)):
            if i == 0:
                x = self.drop[i](self.act[i](self.ln[i](F.max_pool1d(torch.abs(self.conv[i](x)), self.pools[i]))))
            else:
                x = self.drop[i](self.act[i](self.ln[i](F.max_pool1d(self.conv[i](x), self.pools[i]))))
        x = x.view(batch, -1)
        x = self.fc_act(self.fc_ln(self.fc(x)))
        return self.head(x)


# ---------------------------------------------------------------- N-BEATS
class NBeatsBlock(nn.Module):
    def __init__(self, input_size, theta_size, basis_function, layers, layer_size):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(in_features=input_size, out_features=layer_size)]
                                    + [nn.Linear(in_features=layer_size, out_features=layer_size)
                                       for _ in range(layers - 1)])
        self.basis_parameters = nn.Linear(in_features=layer_size, out_features=theta_size)
        self.basis_function = basis_function

    def forward(self, x):
        block_input = x
        for layer in self.layers:
            block_input = torch.relu(layer(block_input))
        basis_parameters = self.basis_parameters(block_input)
        return self.basis_function(basis_parameters)


class GenericBasis(nn.Module):
    def __init__(self, backcast_size, forecast_size):
        super().__init__()
        self.backcast_size, self.forecast_size = backcast_size, forecast_size

    def forward(self, theta):
        return theta[:, :self.backcast_size], theta[:, -self.forecast_size:]


class TrendBasis(nn.Module):
    def __init__(self, degree_of_polynomial, backcast_size, forecast_size):
        super().__init__()
        self.polynomial_size = degree_of_polynomial + 1
        self.register_buffer("backcast_time", torch.stack(
            [torch.pow(torch.arange(backcast_size, dtype=torch.float64) / backcast_size, i)
             for i in range(self.polynomial_size)]).float())
        self.register_buffer("forecast_time", torch.stack(
            [torch.pow(torch.arange(forecast_size, dtype=torch.float64) / forecast_size, i)
             for i in range(self.polynomial_size)]).float())

    def forward(self, theta):
        backcast = torch.einsum("bp,pt->bt", theta[:, self.polynomial_size:], self.backcast_time)
        forecast = torch.einsum("bp,pt->bt", theta[:, :self.polynomial_size], self.forecast_time)
        return backcast, forecast


class SeasonalityBasis(nn.Module):
    def __init__(self, harmonics, backcast_size, forecast_size):
        super().__init__()
        frequency = torch.cat([torch.zeros(1, dtype=torch.float64),
                               torch.arange(harmonics, harmonics / 2 * forecast_size, dtype=torch.float64)
                               / harmonics])[None, :]
        backcast_grid = -2 * math.pi * (torch.arange(backcast_size, dtype=torch.float64)[:, None] / forecast_size) * frequency
        forecast_grid = 2 * math.pi * (torch.arange(forecast_size, dtype=torch.float64)[:, None] / forecast_size) * frequency
        self.register_buffer("backcast_cos_template", torch.cos(backcast_grid).t().float())
        self.register_buffer("backcast_sin_template", torch.sin(backcast_grid).t().float())
        self.register_buffer("forecast_cos_template", torch.cos(forecast_grid).t().float())
        self.register_buffer("forecast_sin_template", torch.sin(forecast_grid).t().float())

    def forward(self, theta):
        params_per_harmonic = theta.shape[1] // 4
        backcast_harmonics_cos = torch.einsum("bp,pt->bt", theta[:, 2 * params_per_harmonic:3 * params_per_harmonic],
                                              self.backcast_cos_template)
        backcast_harmonics_sin = torch.einsum("bp,pt->bt", theta[:, 3 * params_per_harmonic:], self.backcast_sin_template)
        backcast = backcast_harmonics_sin + backcast_harmonics_cos
        forecast_harmonics_cos = torch.einsum("bp,pt->bt", theta[:, :params_per_harmonic], self.forecast_cos_template)
        forecast_harmonics_sin = torch.einsum("bp,pt->bt", theta[:, params_per_harmonic:2 * params_per_harmonic],
                                              self.forecast_sin_template)
        forecast = forecast_harmonics_sin + forecast_harmonics_cos
        return backcast, forecast


class NBeats(nn.Module):
    """N-BEATS (Oreshkin et al. 2020) as ElementAI/N-BEATS (models/nbeats.py) writes it,
    forward(x [B, 16] history, input_mask [B, 16] 0/1) -> forecast [B, 4] (an output for MSE; the
    reference trains on sMAPE/MASE/MAPE): the interpretable configuration — a trend block
    (polynomial basis of degree 2, buffers of powers of arange, einsum("bp,pt->bt")) and a
    seasonality block (cos/sin templates of 2 pi t f, theta split in four by
    theta.shape[1] // 4) — plus one generic block (theta sliced into backcast and forecast);
    each block a stack of ReLU Linears and a theta Linear; the doubly residual loop on the
    time-reversed input: residuals = x.flip(dims=(1,)), input_mask.flip, residuals =
    (residuals - backcast) * input_mask, forecast = forecast + block_forecast starting from the
    last value x[:, -1:]. The reference keeps the basis templates as frozen nn.Parameters; here
    they are buffers."""

    def __init__(self, input_size=16, output_size=4, layers=2, layer_size=16, degree=2, harmonics=2):
        super().__init__()
        trend = TrendBasis(degree, input_size, output_size)
        season = SeasonalityBasis(harmonics, input_size, output_size)
        season_theta = 4 * int(math.ceil(harmonics / 2 * output_size) - (harmonics - 1))
        self.blocks = nn.ModuleList([
            NBeatsBlock(input_size, 2 * (degree + 1), trend, layers, layer_size),
            NBeatsBlock(input_size, season_theta, season, layers, layer_size),
            NBeatsBlock(input_size, input_size + output_size, GenericBasis(input_size, output_size), layers, layer_size),
        ])

    def forward(self, x, input_mask):
        residuals = x.flip(dims=(1,))
        input_mask = input_mask.flip(dims=(1,))
        forecast = x[:, -1:]
        for i, block in enumerate(self.blocks):
            backcast, block_forecast = block(residuals)
            residuals = (residuals - backcast) * input_mask
            forecast = forecast + block_forecast
        return forecast

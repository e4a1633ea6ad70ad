"""Language models written as their public reference code writes them, at toy size: Mamba
(mamba-minimal's selective scan), RWKV-4 (RWKV-LM's time/channel mixing with the WKV
recurrence), BLOOM (HF transformers' ALiBi attention with baddbmm) and Gemma 2 (HF
transformers: (1 + w) RMSNorm, tanh-GeGLU, MQA, soft-capping, sliding-window layers).
make_models.py traces them in train mode."""
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- Mamba
class MambaRMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaBlock(nn.Module):
    def __init__(self, d_model, d_state, d_conv, expand):
        super().__init__()
        self.d_inner = expand * d_model
        self.dt_rank = math.ceil(d_model / 16)
        self.d_state = d_state
        self.in_proj = nn.Linear(d_model, self.d_inner * 2, bias=False)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, bias=True, kernel_size=d_conv,
                                groups=self.d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + d_state * 2, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True)
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(self.d_inner, 1)  # 'n -> d n'
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def forward(self, x):
        (b, l, d) = x.shape
        x_and_res = self.in_proj(x)
        (x, res) = x_and_res.split(split_size=[self.d_inner, self.d_inner], dim=-1)
        x = x.transpose(1, 2)                       # 'b l d_in -> b d_in l'
        x = self.conv1d(x)[:, :, :l]
        x = x.transpose(1, 2)
        x = F.silu(x)
        y = self.ssm(x)
        y = y * F.silu(res)
        return self.out_proj(y)

    def ssm(self, x):
        (d_in, n) = self.A_log.shape
        A = -torch.exp(self.A_log.float())
        D = self.D.float()
        x_dbl = self.x_proj(x)
        (delta, B, C) = x_dbl.split(split_size=[self.dt_rank, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))
        return self.selective_scan(x, delta, A, B, C, D)

    def selective_scan(self, u, delta, A, B, C, D):
        (b, l, d_in) = u.shape
        n = A.shape[1]
        deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
        deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
        x = torch.zeros((b, d_in, n), device=deltaA.device)
        ys = []
        for i in range(l):
            x = deltaA[:, i] * x + deltaB_u[:, i]
            y = torch.einsum("bdn,bn->bd", x, C[:, i, :])
            ys.append(y)
        y = torch.stack(ys, dim=1)  # shape (b, l, d_in)
        return y + u * D


class MambaResidualBlock(nn.Module):
    def __init__(self, d_model, d_state, d_conv, expand):
        super().__init__()
        self.mixer = MambaBlock(d_model, d_state, d_conv, expand)
        self.norm = MambaRMSNorm(d_model)

    def forward(self, x):
        return self.mixer(self.norm(x)) + x


class Mamba(nn.Module):
    """Mamba (Gu and Dao 2023) as johnma2006/mamba-minimal writes it, on token ids [B, 16]:
    embedding, 2 residual blocks with RMSNorm (rsqrt of the mean square); each MambaBlock has
    in_proj split into x and res, a depthwise causal Conv1d(padding = d_conv - 1) cut back to l
    steps with a slice, SiLU, x_proj split into (delta, B, C), softplus(dt_proj(delta)),
    A = -exp(A_log), and the sequential selective scan: deltaA = exp(einsum("bld,dn->bldn")),
    deltaB_u = einsum("bld,bln,bld->bldn") (three operands), a Python loop over the 16 steps
    (shape-dependent, unrolled by the trace) with x = deltaA[:, i] * x + deltaB_u[:, i] and
    y = einsum("bdn,bn->bd", x, C[:, i]), torch.stack over time, + u * D; gated by SiLU(res),
    out_proj. Final RMSNorm and an lm_head tied to the embedding -> logits [B, 16, 64]."""

    def __init__(self, vocab=64, d_model=16, n_layer=2, d_state=4, d_conv=4, expand=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList([MambaResidualBlock(d_model, d_state, d_conv, expand) for _ in range(n_layer)])
        self.norm_f = MambaRMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.embedding.weight  # tie output projection to embedding weights

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm_f(x))


# ---------------------------------------------------------------- RWKV-4
def wkv(w, u, k, v):
    """RWKV-4's WKV operator, computed as the reference CUDA kernel's forward does (and
    RWKV_in_150_lines): a recurrence over time with a running maximum pp for stability."""
    b, t, c = k.shape
    aa = torch.zeros(b, c, dtype=k.dtype)
    bb = torch.zeros(b, c, dtype=k.dtype)
    pp = torch.full((b, c), -1e38, dtype=k.dtype)
    out = []
    for i in range(t):
        kk, vv = k[:, i], v[:, i]
        ww = u + kk
        p = torch.maximum(pp, ww)
        e1 = torch.exp(pp - p)
        e2 = torch.exp(ww - p)
        out.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
        ww = w + pp
        p = torch.maximum(ww, kk)
        e1 = torch.exp(ww - p)
        e2 = torch.exp(kk - p)
        aa = e1 * aa + e2 * vv
        bb = e1 * bb + e2
        pp = p
    return torch.stack(out, dim=1)


class RWKV_TimeMix(nn.Module):
    def __init__(self, n_embd, layer_id, n_layer):
        super().__init__()
        ratio_0_to_1 = layer_id / max(n_layer - 1, 1)
        ratio_1_to_almost0 = 1.0 - (layer_id / n_layer)
        decay_speed = torch.tensor([-5 + 8 * (h / (n_embd - 1)) ** (0.7 + 1.3 * ratio_0_to_1) for h in range(n_embd)])
        self.time_decay = nn.Parameter(decay_speed)
        zigzag = torch.tensor([(i + 1) % 3 - 1 for i in range(n_embd)]) * 0.5
        self.time_first = nn.Parameter(torch.ones(n_embd) * math.log(0.3) + zigzag)
        x = torch.arange(n_embd, dtype=torch.float32).view(1, 1, n_embd) / n_embd
        self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
        self.time_mix_v = nn.Parameter(torch.pow(x, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
        self.time_mix_r = nn.Parameter(torch.pow(x, 0.5 * ratio_1_to_almost0))
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.output = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, x):
        xx = self.time_shift(x)  # mix x with the previous timestep to produce xk, xv, xr
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = self.key(xk)
        v = self.value(xv)
        sr = torch.sigmoid(self.receptance(xr))
        # The CUDA wrapper passes w = -exp(time_decay).
        rwkv = sr * wkv(-torch.exp(self.time_decay), self.time_first, k, v)
        return self.output(rwkv)


class RWKV_ChannelMix(nn.Module):
    def __init__(self, n_embd, layer_id, n_layer):
        super().__init__()
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        ratio_1_to_almost0 = 1.0 - (layer_id / n_layer)
        x = torch.arange(n_embd, dtype=torch.float32).view(1, 1, n_embd) / n_embd
        self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
        self.time_mix_r = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
        hidden_sz = 4 * n_embd
        self.key = nn.Linear(n_embd, hidden_sz, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(hidden_sz, n_embd, bias=False)

    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = self.key(xk)
        k = torch.square(torch.relu(k))
        kv = self.value(k)
        return torch.sigmoid(self.receptance(xr)) * kv


class RWKVBlock(nn.Module):
    def __init__(self, n_embd, layer_id, n_layer):
        super().__init__()
        self.layer_id = layer_id
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        if self.layer_id == 0:
            self.ln0 = nn.LayerNorm(n_embd)
        self.att = RWKV_TimeMix(n_embd, layer_id, n_layer)
        self.ffn = RWKV_ChannelMix(n_embd, layer_id, n_layer)

    def forward(self, x):
        if self.layer_id == 0:
            x = self.ln0(x)
        x = x + self.att(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class RWKV(nn.Module):
    """RWKV-4 (Peng et al. 2023) as BlinkDL/RWKV-LM's v4 model.py writes it, on token ids [B, 16]:
    embedding, 2 blocks (ln0 on the first), time mixing with token shift by
    nn.ZeroPad2d((0, 0, 1, -1)) (a negative pad that drops the last step), learned per-channel
    interpolation x * mix + xx * (1 - mix) for k, v, r, the sigmoid receptance, and the WKV
    operator with w = -exp(time_decay) and bonus u = time_first computed by the stable recurrence
    of the reference CUDA kernel (running max pp initialised to -1e38, torch.maximum, exp of the
    differences, a 16-step loop unrolled by the trace, torch.stack); channel mixing with
    torch.square(torch.relu(key(xk))) gated by sigmoid(receptance); ln_out and an untied head ->
    logits [B, 16, 64]."""

    def __init__(self, vocab=64, n_embd=16, n_layer=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, n_embd)
        self.blocks = nn.Sequential(*[RWKVBlock(n_embd, i, n_layer) for i in range(n_layer)])
        self.ln_out = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        x = self.blocks(x)
        return self.head(self.ln_out(x))


# ---------------------------------------------------------------- BLOOM
def build_alibi_tensor(attention_mask, num_heads, dtype):
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), device=attention_mask.device,
                        dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, device=attention_mask.device, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    # (num_heads is a power of two here, so no extra slopes)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


def bloom_gelu_forward(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def dropout_add(x, residual, prob, training):
    out = F.dropout(x, p=prob, training=training)
    return residual + out


class BloomAttention(nn.Module):
    def __init__(self, hidden, heads, dropout=0.1):
        super().__init__()
        self.num_heads, self.head_dim = heads, hidden // heads
        self.inv_norm_factor = 1.0 / math.sqrt(self.head_dim)
        self.beta = 1.0
        self.hidden_dropout = dropout
        self.query_key_value = nn.Linear(hidden, 3 * hidden, bias=True)
        self.dense = nn.Linear(hidden, hidden)
        self.attention_dropout = nn.Dropout(dropout)

    def forward(self, hidden_states, residual, alibi, attention_mask):
        fused_qkv = self.query_key_value(hidden_states)
        batch_size, q_length, _ = fused_qkv.shape
        fused_qkv = fused_qkv.view(batch_size, q_length, self.num_heads, 3, self.head_dim)
        query_layer = fused_qkv[..., 0, :].transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)
        key_layer = fused_qkv[..., 1, :].permute(0, 2, 3, 1).reshape(batch_size * self.num_heads, self.head_dim, q_length)
        value_layer = fused_qkv[..., 2, :].transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)
        matmul_result = alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=self.beta, alpha=self.inv_norm_factor)
        attention_scores = matmul_result.view(batch_size, self.num_heads, q_length, q_length)
        input_dtype = attention_scores.dtype
        attn_weights = torch.masked_fill(attention_scores, attention_mask, torch.finfo(attention_scores.dtype).min)
        attention_probs = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(input_dtype)
        attention_probs = self.attention_dropout(attention_probs)
        attention_probs_reshaped = attention_probs.view(batch_size * self.num_heads, q_length, q_length)
        context_layer = torch.bmm(attention_probs_reshaped, value_layer)
        # _merge_heads
        context_layer = context_layer.view(batch_size, self.num_heads, q_length, self.head_dim)
        context_layer = context_layer.permute(0, 2, 1, 3).reshape(batch_size, q_length, self.num_heads * self.head_dim)
        output_tensor = self.dense(context_layer)
        return dropout_add(output_tensor, residual, self.hidden_dropout, self.training)


class BloomMLP(nn.Module):
    def __init__(self, hidden, dropout=0.1):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(hidden, 4 * hidden)
        self.dense_4h_to_h = nn.Linear(4 * hidden, hidden)
        self.hidden_dropout = dropout

    def forward(self, hidden_states, residual):
        hidden_states = bloom_gelu_forward(self.dense_h_to_4h(hidden_states))
        return dropout_add(self.dense_4h_to_h(hidden_states), residual, self.hidden_dropout, self.training)


class BloomBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.self_attention = BloomAttention(hidden, heads)
        self.post_attention_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.mlp = BloomMLP(hidden)

    def forward(self, hidden_states, alibi, attention_mask):
        layernorm_output = self.input_layernorm(hidden_states)
        residual = hidden_states  # apply_residual_connection_post_layernorm=False
        attention_output = self.self_attention(layernorm_output, residual, alibi, attention_mask)
        layernorm_output = self.post_attention_layernorm(attention_output)
        return self.mlp(layernorm_output, attention_output)


class Bloom(nn.Module):
    """BLOOM (BigScience 2022) as HF transformers' modeling_bloom.py (4.2x) writes it, forward(
    input_ids [B, 16], attention_mask [B, 16] int64 of 0/1, 1 = real token) -> logits
    [B, 16, 64]: word embeddings + word_embeddings_layernorm; ALiBi from build_alibi_tensor
    (slopes = torch.pow(base, arange(int32)), positions from
    (attention_mask.cumsum(-1) - 1) * attention_mask, so they depend on the input); the causal
    mask as HF's _make_causal_mask builds it (torch.empty bool, mask[:, 0:] = arange < arange
    written in place) or-ed with the inverted expanded padding mask; 2 blocks with a fused
    query_key_value laid out [.., heads, 3, head_dim], scores by
    alibi.baddbmm(q, k, beta=1, alpha=1/sqrt(d)), masked_fill with torch.finfo(float32).min,
    softmax(dtype=float32), attention dropout, bmm; dropout_add residuals; bloom_gelu_forward (the
    tanh approximation written out); ln_f and an lm_head tied to the word embeddings."""

    def __init__(self, vocab=64, hidden=16, heads=2, n_layer=2):
        super().__init__()
        self.num_heads = heads
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.word_embeddings_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.h = nn.ModuleList([BloomBlock(hidden, heads) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.word_embeddings.weight

    @staticmethod
    def _make_causal_mask(input_ids_shape, device):
        batch_size, target_length = input_ids_shape
        mask = torch.empty((target_length, target_length), dtype=torch.bool, device=device)
        seq_ids = torch.arange(target_length, device=device)
        mask[:, 0:] = seq_ids[:, None] < seq_ids[None, :]
        return mask[None, None, :, :].expand(batch_size, 1, target_length, target_length)

    @staticmethod
    def _expand_mask(mask, tgt_length):
        batch_size, src_length = mask.shape
        expanded_mask = ~(mask[:, None, None, :].to(torch.bool))
        return expanded_mask.expand(batch_size, 1, tgt_length, src_length)

    def forward(self, input_ids, attention_mask):
        hidden_states = self.word_embeddings_layernorm(self.word_embeddings(input_ids))
        alibi = build_alibi_tensor(attention_mask, self.num_heads, dtype=hidden_states.dtype)
        causal_mask = self._make_causal_mask(input_ids.shape, input_ids.device)
        causal_mask = self._expand_mask(attention_mask, input_ids.shape[1]) | causal_mask
        for block in self.h:
            hidden_states = block(hidden_states, alibi, causal_mask)
        return self.lm_head(self.ln_f(hidden_states))


# ---------------------------------------------------------------- Gemma 2
class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())  # Gemma: (1 + w), w initialised to zero
        return output.type_as(x)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class GemmaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


class Gemma2Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim, sliding_window, softcap, query_pre_attn_scalar):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim = heads, kv_heads, head_dim
        self.num_key_value_groups = heads // kv_heads
        self.scaling = query_pre_attn_scalar ** -0.5
        self.sliding_window, self.attn_logit_softcapping = sliding_window, softcap
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.rotary_emb = GemmaRotaryEmbedding(head_dim)
        self.attention_dropout = 0.1

    def forward(self, hidden_states, position_ids, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(value_states, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        query_states = (query_states * cos) + (rotate_half(query_states) * sin)
        key_states = (key_states * cos) + (rotate_half(key_states) * sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        attn_weights = attn_weights / self.attn_logit_softcapping
        attn_weights = torch.tanh(attn_weights)
        attn_weights = attn_weights * self.attn_logit_softcapping
        if self.sliding_window is not None:
            min_dtype = torch.finfo(hidden_states.dtype).min
            sliding_window_mask = torch.tril(torch.ones_like(attention_mask, dtype=torch.bool),
                                             diagonal=-self.sliding_window)
            attention_mask = torch.where(sliding_window_mask, min_dtype, attention_mask)
        attn_weights = attn_weights + attention_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_weights = F.dropout(attn_weights, p=self.attention_dropout, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().view(bsz, q_len, -1)
        return self.o_proj(attn_output)


class Gemma2MLP(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Gemma2DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim, intermediate, layer_idx, sliding_window, softcap):
        super().__init__()
        self.is_sliding = not bool(layer_idx % 2)
        self.self_attn = Gemma2Attention(hidden, heads, kv_heads, head_dim,
                                         sliding_window if self.is_sliding else None, softcap, head_dim)
        self.mlp = Gemma2MLP(hidden, intermediate)
        self.input_layernorm = GemmaRMSNorm(hidden)
        self.post_attention_layernorm = GemmaRMSNorm(hidden)
        self.pre_feedforward_layernorm = GemmaRMSNorm(hidden)
        self.post_feedforward_layernorm = GemmaRMSNorm(hidden)

    def forward(self, hidden_states, position_ids, attention_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_ids, attention_mask)
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        return residual + hidden_states


class Gemma2(nn.Module):
    """Gemma 2 (Gemma Team 2024) as HF transformers' modeling_gemma2.py writes it, on token ids
    [B, 16] -> logits [B, 16, 64]: embeddings scaled by torch.tensor(hidden ** 0.5); 2 decoder
    layers, the first with sliding-window attention (window 4: torch.tril(ones_like(mask, bool),
    diagonal=-window) and torch.where onto the causal mask), the second global; GemmaRMSNorm in
    float with the (1 + weight) scale, four per layer (input, post-attention, pre- and
    post-feed-forward); multi-query attention (2 query heads, 1 key/value head, repeat_kv by
    expand + reshape), rotary embeddings from inv_freq @ position_ids with rotate_half, scores
    scaled by query_pre_attn_scalar ** -0.5 and soft-capped (/ cap, tanh, * cap), a causal mask
    from torch.full(finfo.min) + triu(diagonal=1), softmax(dtype=float32), attention dropout;
    the GeGLU MLP gelu(gate, approximate="tanh") * up; final norm, lm_head tied to the embedding,
    and final logit soft-capping (/ 30, tanh, * 30)."""

    def __init__(self, vocab=64, hidden=16, heads=2, kv_heads=1, head_dim=8, intermediate=32, n_layer=2,
                 sliding_window=4, attn_softcap=50.0, final_softcap=30.0):
        super().__init__()
        self.hidden_size, self.final_logit_softcapping = hidden, final_softcap
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([Gemma2DecoderLayer(hidden, heads, kv_heads, head_dim, intermediate, i,
                                                        sliding_window, attn_softcap) for i in range(n_layer)])
        self.norm = GemmaRMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.embed_tokens.weight

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        batch, seq = input_ids.shape
        position_ids = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        dtype = inputs_embeds.dtype
        min_dtype = torch.finfo(dtype).min
        causal_mask = torch.full((seq, seq), fill_value=min_dtype, dtype=dtype, device=input_ids.device)
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask = causal_mask[None, None, :, :].expand(batch, 1, -1, -1)
        normalizer = torch.tensor(self.hidden_size ** 0.5, dtype=dtype)
        hidden_states = inputs_embeds * normalizer
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_ids, causal_mask)
        hidden_states = self.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        logits = logits / self.final_logit_softcapping
        logits = torch.tanh(logits)
        return logits * self.final_logit_softcapping

"""Multimodal models written as their public reference code writes them, at toy size: CLIP
(openai/CLIP model.py with open_clip's contrastive loss) and FiLM for visual question answering
(ethanjperez/film). make_models.py traces them in train mode."""
from collections import OrderedDict

import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- CLIP
class ClipLayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16."""

    def forward(self, x):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, attn_mask=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = ClipLayerNorm(d_model)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(d_model, d_model * 4)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(d_model * 4, d_model))]))
        self.ln_2 = ClipLayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class ClipTransformer(nn.Module):
    def __init__(self, width, layers, heads, attn_mask=None):
        super().__init__()
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, attn_mask) for _ in range(layers)])

    def forward(self, x):
        return self.resblocks(x)


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution, patch_size, width, layers, heads, output_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = ClipLayerNorm(width)
        self.transformer = ClipTransformer(width, layers, heads)
        self.ln_post = ClipLayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x)  # shape = [*, width, grid, grid]
        x = x.reshape(x.shape[0], x.shape[1], -1)  # shape = [*, width, grid ** 2]
        x = x.permute(0, 2, 1)  # shape = [*, grid ** 2, width]
        x = torch.cat([self.class_embedding.to(x.dtype)
                       + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype, device=x.device), x], dim=1)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD
        x = self.ln_post(x[:, 0, :])
        return x @ self.proj


class CLIP(nn.Module):
    """CLIP (Radford et al. 2021) as openai/CLIP's model.py writes it, with open_clip's ClipLoss,
    forward(image [B, 3, 16, 16], text [B, 8] int64 token ids, the end-of-text token 63 the
    largest id in each row, so text.argmax(-1) finds it) -> the scalar contrastive loss.
    Image tower: a ViT — patch Conv2d(bias=False), reshape + permute, the class embedding
    prepended by cat with class_embedding + zeros(B, 1, width), learned positional embedding,
    ln_pre, sequence-first (permute(1, 0, 2)) ResidualAttentionBlocks of nn.MultiheadAttention
    (need_weights=False) and a QuickGELU MLP (x * sigmoid(1.702 x)), ln_post on the class token,
    @ proj. Text tower: token embedding + positional embedding, the same blocks with the causal
    attn_mask built as torch.empty().fill_(-inf).triu_(1) (moved .to(x.dtype) in forward),
    ln_final, the features at the EOT position x[torch.arange(B), text.argmax(dim=-1)] @
    text_projection. Both L2-normalised by x / x.norm(dim=1, keepdim=True); logits =
    logit_scale.exp() * image @ text.t() with logit_scale initialised to log(1 / 0.07); loss =
    (cross_entropy(logits_per_image, arange(B)) + cross_entropy(logits_per_text, arange(B))) / 2.
    CLIP's LayerNorm subclass casts to float32 and back."""

    def __init__(self, embed_dim=16, image_resolution=16, vision_layers=1, vision_width=16, vision_patch_size=4,
                 context_length=8, vocab_size=64, transformer_width=16, transformer_heads=2, transformer_layers=1):
        super().__init__()
        self.context_length = context_length
        self.visual = VisionTransformer(image_resolution, vision_patch_size, vision_width, vision_layers,
                                        vision_width // 8, embed_dim)
        self.transformer = ClipTransformer(transformer_width, transformer_layers, transformer_heads,
                                           self.build_attention_mask())
        self.vocab_size = vocab_size
        self.token_embedding = nn.Embedding(vocab_size, transformer_width)
        self.positional_embedding = nn.Parameter(torch.empty(self.context_length, transformer_width))
        self.ln_final = ClipLayerNorm(transformer_width)
        self.text_projection = nn.Parameter(torch.empty(transformer_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        nn.init.normal_(self.text_projection, std=transformer_width ** -0.5)

    def build_attention_mask(self):
        # lazily create causal attention mask, with full attention between the vision tokens
        mask = torch.empty(self.context_length, self.context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)  # zero out the lower diagonal
        return mask

    def encode_image(self, image):
        return self.visual(image)

    def encode_text(self, text):
        x = self.token_embedding(text)  # [batch_size, n_ctx, d_model]
        x = x + self.positional_embedding
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD
        x = self.ln_final(x)
        # take features from the eot embedding (eot_token is the highest number in each sequence)
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)
        image_features = image_features / image_features.norm(dim=1, keepdim=True)
        text_features = text_features / text_features.norm(dim=1, keepdim=True)
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        logits_per_text = logits_per_image.t()
        labels = torch.arange(logits_per_image.shape[0], device=image.device, dtype=torch.long)
        return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


# ---------------------------------------------------------------- FiLM
def coord_map(shape, start=-1, end=1):
    """film's coord_map: two channels of x and y coordinates in [-1, 1]."""
    m, n = shape
    x_coord_row = torch.linspace(start, end, steps=n)
    y_coord_row = torch.linspace(start, end, steps=m)
    x_coords = x_coord_row.unsqueeze(0).expand(torch.Size((m, n))).unsqueeze(0)
    y_coords = y_coord_row.unsqueeze(1).expand(torch.Size((m, n))).unsqueeze(0)
    return torch.cat([x_coords, y_coords], 0)


class FiLM(nn.Module):
    def forward(self, x, gammas, betas):
        gammas = gammas.unsqueeze(2).unsqueeze(3).expand_as(x)
        betas = betas.unsqueeze(2).unsqueeze(3).expand_as(x)
        return (gammas * x) + betas


class FiLMedResBlock(nn.Module):
    def __init__(self, in_dim, out_dim, kernel_size=3, num_extra_channels=2):
        super().__init__()
        self.input_proj = nn.Conv2d(in_dim + num_extra_channels, in_dim, kernel_size=1)
        self.conv1 = nn.Conv2d(in_dim + num_extra_channels, out_dim, kernel_size=kernel_size,
                               padding=kernel_size // 2)
        self.bn1 = nn.BatchNorm2d(out_dim, affine=False)
        self.film = FiLM()

    def forward(self, x, gammas, betas, extra_channels):
        x = torch.cat([x, extra_channels], 1)
        x = F.relu(self.input_proj(x))
        out = x
        x = torch.cat([x, extra_channels], 1)
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.film(x, gammas, betas)
        x = F.relu(x)
        return x + out


class FiLMVQA(nn.Module):
    """FiLM (Perez et al. 2018) for visual question answering as ethanjperez/film writes its
    FiLMGen and FiLMedNet, forward(image [B, 3, 16, 16], question [B, 8] int64 token ids in 0..31,
    0 = NULL padding) -> answer logits [B, 12]. FiLMGen: token embeddings, a batch-first nn.GRU,
    the hidden state at the last non-NULL token — the index (question != NULL).sum(1) - 1 (the
    reference finds it with a Python loop over the tokens), view(N, 1, 1).expand(N, 1, H) and
    out.gather(1, idx) —, a linear decoder to num_modules * 2 * module_dim FiLM parameters,
    viewed per module and split into gammas (+ 1, the gamma baseline) and betas. FiLMedNet: a
    Conv-BN-ReLU stem; coordinate maps (torch.linspace, expand, cat) appended as two extra
    channels before every conv; 2 FiLMed residual blocks (input_proj 1x1 + ReLU, 3x3 conv,
    BatchNorm2d(affine=False), FiLM gammas * x + betas broadcast by unsqueeze + expand_as, ReLU,
    + residual); the classifier: 1x1 conv, BN, ReLU, F.max_pool2d(2), flatten, Linear,
    BatchNorm1d, ReLU, Linear."""

    def __init__(self, vocab=32, wordvec_dim=16, rnn_dim=16, module_dim=8, num_modules=2, stem_dim=8,
                 classifier_proj_dim=8, fc_dim=16, answers=12, image_size=16, null=0):
        super().__init__()
        self.NULL, self.module_dim, self.num_modules = null, module_dim, num_modules
        # FiLMGen
        self.encoder_embed = nn.Embedding(vocab, wordvec_dim)
        self.encoder_rnn = nn.GRU(wordvec_dim, rnn_dim, batch_first=True)
        self.decoder_linear = nn.Linear(rnn_dim, num_modules * 2 * module_dim)
        # FiLMedNet
        self.stem = nn.Sequential(nn.Conv2d(3, stem_dim, 3, padding=1), nn.BatchNorm2d(stem_dim), nn.ReLU(inplace=True),
                                  nn.Conv2d(stem_dim, module_dim, 3, stride=2, padding=1), nn.BatchNorm2d(module_dim),
                                  nn.ReLU(inplace=True))
        self.fmap = image_size // 2
        self.register_buffer("coords", coord_map((self.fmap, self.fmap)))
        self.blocks = nn.ModuleList([FiLMedResBlock(module_dim, module_dim) for _ in range(num_modules)])
        self.classifier = nn.Sequential(
            nn.Conv2d(module_dim + 2, classifier_proj_dim, kernel_size=1), nn.BatchNorm2d(classifier_proj_dim),
            nn.ReLU(inplace=True), nn.MaxPool2d(kernel_size=2, stride=2), nn.Flatten(),
            nn.Linear(classifier_proj_dim * (self.fmap // 2) ** 2, fc_dim), nn.BatchNorm1d(fc_dim),
            nn.ReLU(inplace=True), nn.Linear(fc_dim, answers))

    def film_gen(self, question):
        n, t = question.size()
        idx = (question != self.NULL).long().sum(1) - 1
        embed = self.encoder_embed(question)
        out, _ = self.encoder_rnn(embed)
        h = out.size(2)
        idx = idx.clamp(min=0).view(n, 1, 1).expand(n, 1, h)
        encoded = out.gather(1, idx).view(n, h)
        return self.decoder_linear(encoded).view(n, self.num_modules, 2 * self.module_dim)

    def forward(self, image, question):
        film = self.film_gen(question)
        x = self.stem(image)
        n = x.size(0)
        coords = self.coords.unsqueeze(0).expand(n, 2, self.fmap, self.fmap)
        for i, block in enumerate(self.blocks):
            gammas, betas = torch.split(film[:, i, :2 * self.module_dim], self.module_dim, dim=-1)
            gammas = gammas + 1  # gamma baseline
            x = block(x, gammas, betas, coords)
        x = torch.cat([x, coords], 1)
        return self.classifier(x)

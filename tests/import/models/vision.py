"""Vision models written as their public reference code writes them, at toy size: an MLP-Mixer
(timm), a DETR set predictor with its set criterion (facebookresearch/detr), a YOLOv5-style
detector (ultralytics/yolov5) and an ESPCN super-resolution net. make_models.py traces them in
train mode."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    """timm's stochastic depth: one Bernoulli draw per sample, made in forward."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Mlp(nn.Module):
    """timm.layers.Mlp: fc1, GELU, dropout, fc2, dropout."""

    def __init__(self, in_features, hidden_features, drop=0.0):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class MixerBlock(nn.Module):
    def __init__(self, dim, seq_len, tokens_hidden, channels_hidden, drop=0.1, drop_path=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp_tokens = Mlp(seq_len, tokens_hidden, drop)
        self.drop_path = DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp_channels = Mlp(dim, channels_hidden, drop)

    def forward(self, x):
        x = x + self.drop_path(self.mlp_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2))
        x = x + self.drop_path(self.mlp_channels(self.norm2(x)))
        return x


class MLPMixer(nn.Module):
    """MLP-Mixer (Tolstikhin et al. 2021) as timm's mlp_mixer.py writes it, on images
    [B, 3, 32, 32]: a patch-embedding Conv2d(kernel = stride = 8) flattened to 16 tokens
    (flatten(2).transpose(1, 2)); 2 MixerBlocks, each a token-mixing Mlp applied across the
    transposed tokens (LayerNorm, transpose(1, 2), fc1-GELU-dropout-fc2-dropout, transpose back)
    and a channel-mixing Mlp, both residual through timm's DropPath — stochastic depth with
    rates from torch.linspace(0, 0.1, depth) (so 0 in block 1, 0.1 in block 2), drawn in forward
    with x.new_empty((B, 1, 1)).bernoulli_(keep_prob).div_(keep_prob); a final
    LayerNorm, the mean over tokens and a linear head -> logits [B, 10]."""

    def __init__(self, patch=8, img=32, dim=16, tokens_hidden=8, channels_hidden=32, depth=2,
                 classes=10, drop_path_rate=0.1):
        super().__init__()
        seq_len = (img // patch) ** 2
        self.stem = nn.Conv2d(3, dim, patch, stride=patch)
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]  # stochastic depth decay rule
        self.blocks = nn.Sequential(*[MixerBlock(dim, seq_len, tokens_hidden, channels_hidden, 0.1, dpr[i])
                                      for i in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)  # timm PatchEmbed (flatten=True)
        x = self.blocks(x)
        x = self.norm(x)
        return self.head(x.mean(dim=1))


# ---------------------------------------------------------------- DETR
def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N,M,2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N,M,2]
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union, union


def generalized_box_iou(boxes1, boxes2):
    iou, union = box_iou(boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


class PositionEmbeddingSine(nn.Module):
    """DETR's sine positional encoding from the (here all-False) padding mask: cumsum of the
    not-mask, normalised, divided by temperature ** (2 * (i // 2) / d), sin/cos interleaved by
    stack + flatten."""

    def __init__(self, num_pos_feats=8, temperature=10000):
        super().__init__()
        self.num_pos_feats, self.temperature = num_pos_feats, temperature
        self.scale = 2 * math.pi

    def forward(self, x):
        b, _, h, w = x.shape
        mask = torch.zeros((b, h, w), dtype=torch.bool, device=x.device)
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        eps = 1e-6
        y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
        x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=x.device)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


class DetrEncoderLayer(nn.Module):
    def __init__(self, d, heads, ff, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, heads, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, src, pos):
        q = k = src + pos
        src2 = self.self_attn(q, k, value=src)[0]
        src = self.norm1(src + self.dropout1(src2))
        src2 = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout2(src2))


class DetrDecoderLayer(nn.Module):
    def __init__(self, d, heads, ff, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, heads, dropout=dropout)
        self.multihead_attn = nn.MultiheadAttention(d, heads, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, tgt, memory, pos, query_pos):
        q = k = tgt + query_pos
        tgt2 = self.self_attn(q, k, value=tgt)[0]
        tgt = self.norm1(tgt + self.dropout1(tgt2))
        tgt2 = self.multihead_attn(query=tgt + query_pos, key=memory + pos, value=memory)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(tgt2))


class DetrMLP(nn.Module):
    """DETR's box head: a few Linears with ReLU between them."""

    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        self.num_layers = num_layers
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x


class DETR(nn.Module):
    """DETR (Carion et al. 2020) with its SetCriterion, after facebookresearch/detr, forward(images
    [B,3,32,32], target_classes [B,Q] int64, target_boxes [B,Q,4]) -> the scalar training loss.
    Backbone: 3 stride-2 Conv-BatchNorm-ReLU stages (32 -> 4), input_proj Conv2d 1x1;
    PositionEmbeddingSine (cumsum of the padding mask's negation, temperature powers with a float
    floor-divide, sin/cos stacked and flattened; folded); the feature map flattened to
    sequence-first [HW, B, d] (flatten(2).permute(2, 0, 1)); one post-norm encoder layer and one
    decoder layer built from nn.MultiheadAttention where the positional encoding is added to
    query and key at every attention (q = k = src + pos); object queries from
    query_embed.weight.unsqueeze(1).repeat(1, B, 1) with tgt = zeros_like; class head
    Linear(d, classes + 1) and a 3-layer box MLP with sigmoid. Loss: DETR's
    F.cross_entropy(logits.transpose(1, 2), target_classes, empty_weight) with the no-object
    class down-weighted by eos_coef (an empty_weight buffer), the L1 box loss and
    1 - diag(generalized_box_iou(...)) of cxcywh -> xyxy boxes (unbind/stack, pairwise
    torch.max/torch.min, clamp), both only over matched queries (target_classes != num_classes)
    and divided by the number of boxes; weights 1, 5, 2. (As in DETR, the first decoder layer's
    self-attention sees an all-zero tgt, so its q/k/out projections and norm1 weight get zero
    gradient at initialisation: the MHA biases start at zero.) The Hungarian matcher (scipy) runs
    outside the graph, so the targets are taken as already permuted to their matched queries.
    target_classes holds 0..num_classes (num_classes = no object); target_boxes are
    (cx, cy, w, h) in (0, 1)."""

    def __init__(self, d=16, heads=2, ff=32, num_queries=8, num_classes=7, eos_coef=0.1):
        super().__init__()
        self.num_classes = num_classes
        chans = [3, 8, 16, 16]
        layers = []
        for cin, cout in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
        self.backbone = nn.Sequential(*layers)
        self.input_proj = nn.Conv2d(chans[-1], d, kernel_size=1)
        self.position_embedding = PositionEmbeddingSine(d // 2)
        self.encoder = DetrEncoderLayer(d, heads, ff)
        self.decoder = DetrDecoderLayer(d, heads, ff)
        self.decoder_norm = nn.LayerNorm(d)
        self.query_embed = nn.Embedding(num_queries, d)
        self.class_embed = nn.Linear(d, num_classes + 1)
        self.bbox_embed = DetrMLP(d, d, 4, 3)
        empty_weight = torch.ones(num_classes + 1)
        empty_weight[-1] = eos_coef
        self.register_buffer("empty_weight", empty_weight)

    def forward(self, images, target_classes, target_boxes):
        features = self.backbone(images)
        pos = self.position_embedding(features)
        src = self.input_proj(features)
        bs, c, h, w = src.shape
        src = src.flatten(2).permute(2, 0, 1)
        pos = pos.flatten(2).permute(2, 0, 1)
        query_embed = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
        tgt = torch.zeros_like(query_embed)
        memory = self.encoder(src, pos)
        hs = self.decoder_norm(self.decoder(tgt, memory, pos, query_embed)).transpose(0, 1)  # [B, Q, d]
        src_logits = self.class_embed(hs)
        src_boxes = self.bbox_embed(hs).sigmoid()
        # SetCriterion.loss_labels
        loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)
        # loss_boxes, over the matched queries only
        matched = (target_classes != self.num_classes).float()
        num_boxes = matched.sum().clamp(min=1)
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none").sum(-1)
        loss_bbox = (loss_bbox * matched).sum() / num_boxes
        loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes.flatten(0, 1)),
                                                       box_cxcywh_to_xyxy(target_boxes.flatten(0, 1))))
        loss_giou = (loss_giou * matched.flatten()).sum() / num_boxes
        return loss_ce + 5 * loss_bbox + 2 * loss_giou


# ---------------------------------------------------------------- YOLOv5
def autopad(k, p=None):
    return k // 2 if p is None else p


class Conv(nn.Module):
    """YOLOv5's Conv: Conv2d(bias=False), BatchNorm2d, SiLU."""

    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Focus(nn.Module):
    """Space-to-depth by four strided slices concatenated on channels, then a Conv."""

    def __init__(self, c1, c2, k=1):
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k)

    def forward(self, x):
        return self.conv(torch.cat((x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]), 1))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Detect(nn.Module):
    def __init__(self, nc, anchors, ch, strides):
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32).view(self.nl, -1, 2))
        self.stride = strides
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)

    def _make_grid(self, nx, ny, i):
        shape = 1, self.na, ny, nx, 2
        y, x = torch.arange(ny, dtype=torch.float32), torch.arange(nx, dtype=torch.float32)
        yv, xv = torch.meshgrid(y, x, indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(shape) - 0.5  # add grid offset, i.e. y = 2.0 * x - 0.5
        anchor_grid = (self.anchors[i] * self.stride[i]).view((1, self.na, 1, 1, 2)).expand(shape)
        return grid, anchor_grid

    def forward(self, xs):
        z = []
        for i in range(self.nl):
            x = self.m[i](xs[i])
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            grid, anchor_grid = self._make_grid(nx, ny, i)
            xy, wh, conf = x.sigmoid().split((2, 2, self.nc + 1), 4)
            xy = (xy * 2 + grid) * self.stride[i]
            wh = (wh * 2) ** 2 * anchor_grid
            y = torch.cat((xy, wh, conf), 4)
            z.append(y.view(bs, self.na * nx * ny, self.no))
        return torch.cat(z, 1)


class YOLOv5(nn.Module):
    """A YOLOv5-style detector (ultralytics/yolov5 models/common.py, models/yolo.py) on
    [B, 3, 32, 32]: Focus (space-to-depth by four strided slices x[..., ::2, ::2] ... and cat),
    Conv = Conv2d(bias=False)-BatchNorm2d-SiLU, C3 CSP blocks with residual Bottlenecks, SPPF
    (one MaxPool2d(5, 1, 2) applied three times in a chain, cat), a PAN neck (nn.Upsample(None,
    2, "nearest"), cat, C3; a stride-2 Conv back down, cat, C3) and the Detect head on two levels
    (strides 4 and 8, 8x8 and 4x4): a 1x1 conv to na * (5 + nc) channels, view + permute(0, 1, 3, 4, 2).contiguous(),
    sigmoid, split((2, 2, nc + 1), 4), the v5 decode (xy * 2 + grid) * stride and
    (wh * 2) ** 2 * anchor_grid with the grid from torch.meshgrid(indexing="ij") + stack +
    expand - 0.5 and anchor_grid from an anchors buffer; cat of both levels -> [B, 240, 8]
    (the export path's decoded predictions, trained here with MSE)."""

    def __init__(self, nc=3, w=4):
        super().__init__()
        anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119]]
        self.focus = Focus(3, w, 3)                  # 16x16 (stride 2)
        self.down1 = Conv(w, 2 * w, 3, 2)            # 8x8   (stride 4)
        self.c3_1 = C3(2 * w, 2 * w, 1)
        self.down2 = Conv(2 * w, 4 * w, 3, 2)        # 4x4   (stride 8)
        self.c3_2 = C3(4 * w, 4 * w, 1)
        self.sppf = SPPF(4 * w, 4 * w, 5)
        self.lat = Conv(4 * w, 2 * w, 1, 1)
        self.up = nn.Upsample(None, 2, "nearest")
        self.c3_3 = C3(4 * w, 2 * w, 1, False)       # P3 out
        self.down3 = Conv(2 * w, 2 * w, 3, 2)
        self.c3_4 = C3(4 * w, 4 * w, 1, False)       # P4 out
        self.detect = Detect(nc, anchors, (2 * w, 4 * w), (4.0, 8.0))

    def forward(self, x):
        p3 = self.c3_1(self.down1(self.focus(x)))
        p4 = self.sppf(self.c3_2(self.down2(p3)))
        lat = self.lat(p4)
        n3 = self.c3_3(torch.cat([self.up(lat), p3], 1))
        n4 = self.c3_4(torch.cat([self.down3(n3), lat], 1))
        return self.detect([n3, n4])


class ESPCN(nn.Module):
    """ESPCN (Shi et al. 2016), the efficient sub-pixel super-resolution network, as PyTorch's
    examples/super_resolution writes it: Conv2d 5x5 + tanh, Conv2d 3x3 + tanh, Conv2d 3x3 to
    upscale ** 2 channels, then F.pixel_shuffle(x, 2); on the luminance channel [B,1,16,16]
    -> [B,1,32,32] (an output for MSE against the high-resolution image)."""

    def __init__(self, upscale_factor=2, width=16):
        super().__init__()
        self.upscale_factor = upscale_factor
        self.conv1 = nn.Conv2d(1, width, 5, padding=2)
        self.conv2 = nn.Conv2d(width, width // 2, 3, padding=1)
        self.conv3 = nn.Conv2d(width // 2, upscale_factor ** 2, 3, padding=1)

    def forward(self, x):
        x = torch.tanh(self.conv1(x))
        x = torch.tanh(self.conv2(x))
        return F.pixel_shuffle(self.conv3(x), self.upscale_factor)

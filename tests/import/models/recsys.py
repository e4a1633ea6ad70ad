"""Recommendation models written as their public reference code writes them, at toy size: DLRM
(facebookresearch/dlrm), DeepFM (rixwew/pytorch-fm) and DCN-v2 with its mixture of low-rank
cross experts (shenweichen/DeepCTR-Torch's DCNMix). make_models.py traces them in train mode."""
import torch
import torch.nn.functional as F
from torch import nn


class DLRM(nn.Module):
    """DLRM (Naumov et al. 2019) as facebookresearch/dlrm's dlrm_s_pytorch.py writes it,
    forward(dense_x [B, 4], sparse_ids [B, 3, 4] int64 raw ids in 0..999999) -> click
    probability [B, 1] (sigmoid; the reference's default --loss-function is mse). Each of the 3
    sparse features holds a bag of 4 raw ids, hashed into its table with ids % num_buckets (the
    Criteo pipeline's max_ind_range modulo), flattened and looked up with
    nn.EmbeddingBag(mode="sum") and per-bag offsets from torch.arange(B) * bag (what
    lS_o holds); the bottom MLP (Linear + ReLU) on the dense features; the "dot" interaction:
    T = cat([x] + ly).view(B, -1, d), Z = torch.bmm(T, T.transpose(1, 2)), the strictly lower
    triangle picked with torch.tril_indices(ni, nj, offset=-1) and Z[:, li, lj] (the reference
    builds the same index pairs with a list comprehension), cat with x; the top MLP with a
    sigmoid at the end."""

    def __init__(self, m_spa=8, ln_emb=(20, 16, 12), ln_bot=(4, 8, 8), ln_top=(14, 8, 1)):
        super().__init__()
        self.ln_emb = list(ln_emb)
        self.emb_l = nn.ModuleList([nn.EmbeddingBag(n, m_spa, mode="sum", sparse=False) for n in ln_emb])
        self.bot_l = self.create_mlp(ln_bot, sigmoid_layer=-1)
        self.top_l = self.create_mlp(ln_top, sigmoid_layer=len(ln_top) - 2)

    @staticmethod
    def create_mlp(ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, len(ln) - 1):
            n, m = ln[i], ln[i + 1]
            layers.append(nn.Linear(int(n), int(m), bias=True))
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return nn.Sequential(*layers)

    def apply_emb(self, lS_o, lS_i):
        ly = []
        for k, E in enumerate(self.emb_l):
            ly.append(E(lS_i[k], lS_o[k], per_sample_weights=None))
        return ly

    def interact_features(self, x, ly):
        (batch_size, d) = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        _, ni, nj = Z.shape
        offset = 0  # arch_interaction_itself = False
        li, lj = torch.tril_indices(ni, nj, offset=offset - 1)
        Zflat = Z[:, li, lj]
        return torch.cat([x] + [Zflat], dim=1)

    def forward(self, dense_x, sparse_ids):
        b, n_tables, bag = sparse_ids.shape
        lS_i = [(sparse_ids[:, k] % self.ln_emb[k]).reshape(-1) for k in range(n_tables)]
        lS_o = [torch.arange(b, device=sparse_ids.device) * bag for _ in range(n_tables)]
        x = self.bot_l(dense_x)
        ly = self.apply_emb(lS_o, lS_i)
        z = self.interact_features(x, ly)
        return self.top_l(z)


# ---------------------------------------------------------------- DeepFM (pytorch-fm)
class FeaturesLinear(nn.Module):
    def __init__(self, field_dims, output_dim=1):
        super().__init__()
        self.fc = nn.Embedding(sum(field_dims), output_dim)
        self.bias = nn.Parameter(torch.zeros((output_dim,)))
        self.offsets = [0] + torch.tensor(field_dims).cumsum(0)[:-1].tolist()

    def forward(self, x):
        x = x + x.new_tensor(self.offsets).unsqueeze(0)
        return torch.sum(self.fc(x), dim=1) + self.bias


class FeaturesEmbedding(nn.Module):
    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = nn.Embedding(sum(field_dims), embed_dim)
        self.offsets = [0] + torch.tensor(field_dims).cumsum(0)[:-1].tolist()
        nn.init.xavier_uniform_(self.embedding.weight.data)

    def forward(self, x):
        x = x + x.new_tensor(self.offsets).unsqueeze(0)
        return self.embedding(x)


class FactorizationMachine(nn.Module):
    def __init__(self, reduce_sum=True):
        super().__init__()
        self.reduce_sum = reduce_sum

    def forward(self, x):
        square_of_sum = torch.sum(x, dim=1) ** 2
        sum_of_square = torch.sum(x ** 2, dim=1)
        ix = square_of_sum - sum_of_square
        if self.reduce_sum:
            ix = torch.sum(ix, dim=1, keepdim=True)
        return 0.5 * ix


class MultiLayerPerceptron(nn.Module):
    def __init__(self, input_dim, embed_dims, dropout, output_layer=True):
        super().__init__()
        layers = []
        for embed_dim in embed_dims:
            layers.append(nn.Linear(input_dim, embed_dim))
            layers.append(nn.BatchNorm1d(embed_dim))
            layers.append(nn.ReLU())
            layers.append(nn.Dropout(p=dropout))
            input_dim = embed_dim
        if output_layer:
            layers.append(nn.Linear(input_dim, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(x)


class DeepFM(nn.Module):
    """DeepFM (Guo et al. 2017) as rixwew/pytorch-fm writes it, forward(x [B, 4] int64 field
    values, label [B] float 0/1) -> the scalar BCELoss the reference trains with: per-field ids
    shifted into one shared table by x + x.new_tensor(offsets).unsqueeze(0) (so x indexes no
    embedding directly: field k takes 0..field_dims[k]-1, field_dims = (8, 12, 16, 4)); the
    first-order term from an Embedding(sum, 1) summed plus a bias; the FM second-order term
    0.5 * sum((sum_f e)^2 - sum_f e^2); the deep part — embeddings flattened by view, Linear,
    BatchNorm1d, ReLU, Dropout twice, Linear to 1; their sum through torch.sigmoid(x.squeeze(1))
    and F.binary_cross_entropy against the label."""

    def __init__(self, field_dims=(8, 12, 16, 4), embed_dim=8, mlp_dims=(16, 16), dropout=0.2):
        super().__init__()
        self.linear = FeaturesLinear(field_dims)
        self.fm = FactorizationMachine(reduce_sum=True)
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.embed_output_dim = len(field_dims) * embed_dim
        self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropout)

    def forward(self, x, label):
        embed_x = self.embedding(x)
        x = self.linear(x) + self.fm(embed_x) + self.mlp(embed_x.view(-1, self.embed_output_dim))
        prob = torch.sigmoid(x.squeeze(1))
        return F.binary_cross_entropy(prob, label)


# ---------------------------------------------------------------- DCN-v2 (DeepCTR-Torch DCNMix)
class CrossNetMix(nn.Module):
    def __init__(self, in_features, low_rank=4, num_experts=2, layer_num=2):
        super().__init__()
        self.layer_num, self.num_experts = layer_num, num_experts
        # U: (in_features, low_rank)
        self.U_list = nn.Parameter(torch.Tensor(self.layer_num, num_experts, in_features, low_rank))
        # V: (in_features, low_rank)
        self.V_list = nn.Parameter(torch.Tensor(self.layer_num, num_experts, in_features, low_rank))
        # C: (low_rank, low_rank)
        self.C_list = nn.Parameter(torch.Tensor(self.layer_num, num_experts, low_rank, low_rank))
        self.gating = nn.ModuleList([nn.Linear(in_features, 1, bias=False) for _ in range(self.num_experts)])
        self.bias = nn.Parameter(torch.Tensor(self.layer_num, in_features, 1))
        for i in range(self.layer_num):
            nn.init.xavier_normal_(self.U_list[i])
            nn.init.xavier_normal_(self.V_list[i])
            nn.init.xavier_normal_(self.C_list[i])
        for i in range(len(self.bias)):
            nn.init.zeros_(self.bias[i])

    def forward(self, inputs):
        x_0 = inputs.unsqueeze(2)  # (bs, in_features, 1)
        x_l = x_0
        for i in range(self.layer_num):
            output_of_experts = []
            gating_score_of_experts = []
            for expert_id in range(self.num_experts):
                # (1) G(x_l): compute the gating score
                gating_score_of_experts.append(self.gating[expert_id](x_l.squeeze(2)))
                # (2) E(x_l): project input onto the low-rank space, non-linear, project back
                v_x = torch.matmul(self.V_list[i][expert_id].t(), x_l)  # (bs, low_rank, 1)
                v_x = torch.tanh(v_x)
                v_x = torch.matmul(self.C_list[i][expert_id], v_x)
                v_x = torch.tanh(v_x)
                uv_x = torch.matmul(self.U_list[i][expert_id], v_x)  # (bs, in_features, 1)
                dot_ = uv_x + self.bias[i]
                dot_ = x_0 * dot_  # Hadamard-product
                output_of_experts.append(dot_.squeeze(2))
            # (3) mixture of low-rank experts
            output_of_experts = torch.stack(output_of_experts, 2)  # (bs, in_features, num_experts)
            gating_score_of_experts = torch.stack(gating_score_of_experts, 1)  # (bs, num_experts, 1)
            moe_out = torch.matmul(output_of_experts, gating_score_of_experts.softmax(1))
            x_l = moe_out + x_l  # (bs, in_features, 1)
        return x_l.squeeze()  # (bs, in_features)


class DCNv2(nn.Module):
    """DCN-v2 (Wang et al. 2021) with the mixture of low-rank cross experts (DCN-Mix), as
    shenweichen/DeepCTR-Torch's DCNMix and CrossNetMix write it, forward(dense [B, 4], sparse
    [B, 4] int64, label [B] float 0/1) -> the scalar loss. One nn.Embedding per sparse field
    (field k indexed directly by sparse[:, k], vocabularies (10, 20, 8, 12)), concatenated with
    the dense features into x0 [B, 36]; the cross network: 2 layers x 2 experts of
    tanh(C tanh(V^T x_l)) projected back by U (torch.matmul with .t() of indexed stacked
    parameters), + bias, Hadamard product with x0, the experts torch.stack-ed and mixed by a
    softmax over per-expert Linear gates, + x_l, and x_l.squeeze() at the end; a parallel DNN
    (Linear-ReLU-Dropout x2); cat, a final Linear to one logit and
    F.binary_cross_entropy_with_logits (torchrec's BCEWithLogitsLoss) against the label."""

    def __init__(self, dense_features=4, vocab_sizes=(10, 20, 8, 12), embed_dim=8, dnn=(16, 16), dropout=0.1):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(v, embed_dim) for v in vocab_sizes])
        in_features = dense_features + len(vocab_sizes) * embed_dim
        self.crossnet = CrossNetMix(in_features)
        layers, d = [], in_features
        for h in dnn:
            layers += [nn.Linear(d, h), nn.ReLU(), nn.Dropout(dropout)]
            d = h
        self.dnn = nn.Sequential(*layers)
        self.dnn_linear = nn.Linear(in_features + d, 1, bias=False)

    def forward(self, dense, sparse, label):
        sparse_embedding_list = [emb(sparse[:, k]) for k, emb in enumerate(self.embeddings)]
        dnn_input = torch.cat([torch.cat(sparse_embedding_list, dim=-1), dense], dim=-1)
        deep_out = self.dnn(dnn_input)
        cross_out = self.crossnet(dnn_input)
        stack_out = torch.cat((cross_out, deep_out), dim=-1)
        logit = self.dnn_linear(stack_out)
        return F.binary_cross_entropy_with_logits(logit.squeeze(1), label)

"""Graph networks written as their public reference code writes them, at toy size, on dense
inputs (an adjacency matrix or atom coordinates, so every input has the batch — nodes or graphs —
first): SchNet (PyTorch Geometric's SchNet on dense molecules), GCN (tkipf/pygcn with PyG's
DenseGCNConv normalisation), GraphSAGE (graphsage-simple's sampled mean aggregator) and GIN
(weihua916/powerful-gnns). make_models.py traces them in train mode."""
import math

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- SchNet
class ShiftedSoftplus(nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = torch.log(torch.tensor(2.0)).item()

    def forward(self, x):
        return F.softplus(x) - self.shift


class GaussianSmearing(nn.Module):
    def __init__(self, start=0.0, stop=5.0, num_gaussians=16):
        super().__init__()
        offset = torch.linspace(start, stop, num_gaussians)
        self.coeff = -0.5 / (offset[1] - offset[0]).item() ** 2
        self.register_buffer("offset", offset)

    def forward(self, dist):
        dist = dist.view(-1, 1) - self.offset.view(1, -1)
        return torch.exp(self.coeff * torch.pow(dist, 2))


class CFConv(nn.Module):
    """Continuous-filter convolution: filters from the RBF expansion times a cosine cutoff, applied
    to lin1(x) of the neighbours and summed (PyG's propagate with aggr="add", dense here)."""

    def __init__(self, in_channels, out_channels, num_filters, filter_nn, cutoff):
        super().__init__()
        self.lin1 = nn.Linear(in_channels, num_filters, bias=False)
        self.lin2 = nn.Linear(num_filters, out_channels)
        self.nn = filter_nn
        self.cutoff = cutoff

    def forward(self, x, edge_weight, edge_attr, edge_mask):
        C = 0.5 * (torch.cos(edge_weight * math.pi / self.cutoff) + 1.0)
        C = C * edge_mask
        W = self.nn(edge_attr).view(*edge_weight.shape, -1) * C.unsqueeze(-1)  # [B, A, A, F]
        x = self.lin1(x)
        x = (W * x.unsqueeze(1)).sum(dim=2)  # message x_j * W, summed over neighbours j
        return self.lin2(x)


class InteractionBlock(nn.Module):
    def __init__(self, hidden_channels, num_gaussians, num_filters, cutoff):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(num_gaussians, num_filters), ShiftedSoftplus(),
                                 nn.Linear(num_filters, num_filters))
        self.conv = CFConv(hidden_channels, hidden_channels, num_filters, self.mlp, cutoff)
        self.act = ShiftedSoftplus()
        self.lin = nn.Linear(hidden_channels, hidden_channels)

    def forward(self, x, edge_weight, edge_attr, edge_mask):
        x = self.conv(x, edge_weight, edge_attr, edge_mask)
        x = self.act(x)
        return self.lin(x)


class SchNet(nn.Module):
    """SchNet (Schütt et al. 2017) as PyTorch Geometric's SchNet writes it, on a batch of dense
    molecules: forward(z [B, 12] int64 atomic numbers in 0..9, pos [B, 12, 3]) -> energy [B, 1]
    (an output for MSE). Atom embeddings; interatomic distances by torch.cdist(pos, pos); the
    radius graph (distance < cutoff, no self loops: ~eye) as a float mask instead of PyG's
    radius_graph edge list; GaussianSmearing (linspace offsets, dist.view(-1, 1) - offset,
    exp(coeff * pow(., 2))); 2 interaction blocks: CFConv with the filter network
    Linear-ShiftedSoftplus-Linear times the cosine cutoff 0.5 * (cos(d * pi / cutoff) + 1), the
    neighbour sum (x_j * W).sum over j, ShiftedSoftplus (softplus(x) - log 2), Linear, residual;
    lin1, ShiftedSoftplus, lin2 to one value per atom, the sum over atoms (readout "add")."""

    def __init__(self, hidden_channels=16, num_filters=16, num_interactions=2, num_gaussians=16, cutoff=5.0,
                 max_z=10):
        super().__init__()
        self.cutoff = cutoff
        self.embedding = nn.Embedding(max_z, hidden_channels)
        self.distance_expansion = GaussianSmearing(0.0, cutoff, num_gaussians)
        self.interactions = nn.ModuleList([InteractionBlock(hidden_channels, num_gaussians, num_filters, cutoff)
                                           for _ in range(num_interactions)])
        self.lin1 = nn.Linear(hidden_channels, hidden_channels // 2)
        self.act = ShiftedSoftplus()
        self.lin2 = nn.Linear(hidden_channels // 2, 1)

    def forward(self, z, pos):
        b, a = z.shape
        h = self.embedding(z)
        edge_weight = torch.cdist(pos, pos)                                   # [B, A, A]
        not_self = ~torch.eye(a, dtype=torch.bool, device=pos.device)
        edge_mask = ((edge_weight < self.cutoff) & not_self).to(pos.dtype)
        edge_attr = self.distance_expansion(edge_weight)                      # [B*A*A, G]
        for interaction in self.interactions:
            h = h + interaction(h, edge_weight, edge_attr, edge_mask)
        h = self.lin2(self.act(self.lin1(h)))
        return h.sum(dim=1)


# ---------------------------------------------------------------- GCN
class GraphConvolution(nn.Module):
    """pygcn's layer: support = mm(input, W); output = adj @ support + b."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = nn.Parameter(torch.FloatTensor(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.mm(adj, support)  # pygcn: torch.spmm on a sparse adj
        if self.bias is not None:
            return output + self.bias
        return output


class GCN(nn.Module):
    """GCN (Kipf and Welling 2017) as tkipf/pygcn writes it, forward(x [16, 8] node features,
    adj [16, 16] 0/1 symmetric adjacency) -> log_softmax node logits [16, 4] (node
    classification, the batch is the nodes). The renormalised adjacency D^-1/2 (A + I) D^-1/2 is
    computed in forward as PyG's DenseGCNConv does it — adj.clone(), idx = arange(N),
    adj[idx, idx] = 1 (an index_put_), deg = adj.sum(-1).clamp(min=1).pow(-0.5), the
    broadcast products — instead of pygcn's scipy preprocessing; two GraphConvolution layers
    (torch.mm for the weight, a dense torch.mm where pygcn uses torch.spmm), ReLU,
    F.dropout(training=self.training), F.log_softmax(dim=1)."""

    def __init__(self, nfeat=8, nhid=16, nclass=4, dropout=0.5):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    @staticmethod
    def normalize(adj):
        n = adj.size(0)
        adj = adj.clone()
        idx = torch.arange(n, dtype=torch.long, device=adj.device)
        adj[idx, idx] = 1
        deg_inv_sqrt = adj.sum(dim=-1).clamp(min=1).pow(-0.5)
        return deg_inv_sqrt.unsqueeze(-1) * adj * deg_inv_sqrt.unsqueeze(-2)

    def forward(self, x, adj):
        adj = self.normalize(adj)
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


# ---------------------------------------------------------------- GraphSAGE
class MeanAggregator(nn.Module):
    """graphsage-simple's MeanAggregator: sample num_sample neighbours per node, then
    mask.div(num_neigh).mm(features). The sampling is drawn in forward as a tensor: random
    scores on the neighbours (torch.rand_like(adj) * adj), topk per row, a one-hot mask by
    zeros_like().scatter_, restricted to true neighbours (* adj)."""

    def __init__(self, num_sample=4):
        super().__init__()
        self.num_sample = num_sample

    def forward(self, features, adj):
        scores = torch.rand_like(adj) * adj
        _, picked = torch.topk(scores, self.num_sample, dim=1)
        mask = torch.zeros_like(adj).scatter_(1, picked, 1.0) * adj
        num_neigh = mask.sum(1, keepdim=True).clamp(min=1)
        mask = mask.div(num_neigh)
        return mask.mm(features)


class SageEncoder(nn.Module):
    def __init__(self, feature_dim, embed_dim, num_sample):
        super().__init__()
        self.aggregator = MeanAggregator(num_sample)
        self.weight = nn.Parameter(torch.FloatTensor(embed_dim, 2 * feature_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, features, adj):
        neigh_feats = self.aggregator(features, adj)
        combined = torch.cat([features, neigh_feats], dim=1)
        combined = F.relu(self.weight.mm(combined.t()))
        return combined.t()


class GraphSAGE(nn.Module):
    """GraphSAGE (Hamilton et al. 2017), the supervised model as williamleif/graphsage-simple
    writes it, forward(x [16, 8], adj [16, 16] 0/1) -> node logits [16, 4]: two encoders, each
    a MeanAggregator over num_sample = 4 neighbours sampled in forward (torch.rand_like on the
    adjacency, torch.topk per row, scatter_ into a mask, * adj, div by the count, mask.mm),
    CONCAT(self, neighbours) by torch.cat, relu(W.mm(combined.t())).t(), and the paper's
    per-layer F.normalize(p=2, dim=1) of the embeddings (Algorithm 1, line 7); then
    weight.mm(embeds.t()).t() as the scores."""

    def __init__(self, features=8, hidden=16, classes=4, num_sample=4):
        super().__init__()
        self.enc1 = SageEncoder(features, hidden, num_sample)
        self.enc2 = SageEncoder(hidden, hidden, num_sample)
        self.weight = nn.Parameter(torch.FloatTensor(classes, hidden))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x, adj):
        h = F.normalize(self.enc1(x, adj), p=2, dim=1)
        embeds = F.normalize(self.enc2(h, adj), p=2, dim=1)
        return self.weight.mm(embeds.t()).t()


# ---------------------------------------------------------------- GIN
class GinMLP(nn.Module):
    def __init__(self, num_layers, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.num_layers = num_layers
        self.linears = nn.ModuleList()
        self.batch_norms = nn.ModuleList()
        self.linears.append(nn.Linear(input_dim, hidden_dim))
        for _ in range(num_layers - 2):
            self.linears.append(nn.Linear(hidden_dim, hidden_dim))
        self.linears.append(nn.Linear(hidden_dim, output_dim))
        for _ in range(num_layers - 1):
            self.batch_norms.append(nn.BatchNorm1d(hidden_dim))

    def forward(self, x):
        h = x
        for layer in range(self.num_layers - 1):
            h = F.relu(self.batch_norms[layer](self.linears[layer](h)))
        return self.linears[self.num_layers - 1](h)


class GIN(nn.Module):
    """GIN (Xu et al. 2019) as weihua916/powerful-gnns' GraphCNN writes it (learn_eps, sum
    neighbour pooling, sum graph pooling), on a batch of dense graphs: forward(x [B, 12, 8],
    adj [B, 12, 12] 0/1) -> graph logits [B, 4]. Each of 2 layers: pooled = bmm(adj, h) (the
    reference's torch.spmm on a block-diagonal sparse adjacency) + (1 + eps[layer]) * h with a
    learned eps, a 2-layer MLP with BatchNorm1d on the flattened nodes, BatchNorm1d, ReLU; the
    readout sums the nodes of every layer's representation (input included) and adds a
    F.dropout-ed linear prediction per layer."""

    def __init__(self, num_layers=3, num_mlp_layers=2, input_dim=8, hidden_dim=16, output_dim=4,
                 final_dropout=0.5):
        super().__init__()
        self.num_layers, self.final_dropout = num_layers, final_dropout
        self.eps = nn.Parameter(torch.zeros(self.num_layers - 1))
        self.mlps = nn.ModuleList()
        self.batch_norms = nn.ModuleList()
        for layer in range(self.num_layers - 1):
            self.mlps.append(GinMLP(num_mlp_layers, input_dim if layer == 0 else hidden_dim, hidden_dim, hidden_dim))
            self.batch_norms.append(nn.BatchNorm1d(hidden_dim))
        self.linears_prediction = nn.ModuleList()
        for layer in range(num_layers):
            self.linears_prediction.append(nn.Linear(input_dim if layer == 0 else hidden_dim, output_dim))

    def next_layer_eps(self, h, layer, adj):
        pooled = torch.bmm(adj, h)
        pooled = pooled + (1 + self.eps[layer]) * h
        b, n, d = pooled.shape
        pooled_rep = self.mlps[layer](pooled.reshape(b * n, d))
        h = self.batch_norms[layer](pooled_rep)
        return F.relu(h).view(b, n, -1)

    def forward(self, x, adj):
        hidden_rep = [x]
        h = x
        for layer in range(self.num_layers - 1):
            h = self.next_layer_eps(h, layer, adj)
            hidden_rep.append(h)
        score_over_layer = 0
        for layer, h in enumerate(hidden_rep):
            pooled_h = h.sum(dim=1)  # graph_pool (sum)
            score_over_layer += F.dropout(self.linears_prediction[layer](pooled_h), self.final_dropout,
                                          training=self.training)
        return score_over_layer

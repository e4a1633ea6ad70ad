"""The real-model families of the importer's suite: one miniature per published architecture,
written as its reference code writes it (vision.py, language.py, audio.py, recsys.py,
generative.py, graph.py, sigproc.py, multimodal.py), traced in train mode by make_models.py
(add_families) into `archive`.

Each entry:
  archive    the file make_models.py writes
  family     the architecture; reference: the paper and the code the miniature follows
  domain     vision | language | audio | recommendation | generative | graph | signal | multimodal
  inputs     MAP CLI input specs NAME:DTYPE[D0,...] (dtypes f32, f64, i64, bool), in forward's
             order; dim 0 is the batch (8; the node count, 16, for the node-level graph models)
  loss       how MAP trains it: "cross_entropy" (the model returns logits, class dim last; MAP
             appends a cross-entropy with random integer targets), "mse" (an output regressed
             with MSE) or "output" (the model returns the scalar training loss itself)
  ranges     valid values of inputs whose values matter: integer inputs (inclusive range; for
             ids used directly as an embedding index, the table size) and float inputs that
             must stay in a domain (0..1 masks and labels, -1..1 waveforms). Inputs not listed
             take any value of their dtype (standard normal is what make_models.py uses).
  random     how forward draws random numbers besides nn.Dropout / F.dropout (absent: none)

make_models.py checks that `inputs` match the traced archives and that loss == "output" exactly
when the model returns a 0-d tensor.
"""

FAMILIES = [
    # ------------------------------------------------------------------ vision
    dict(archive="mlp_mixer_trace_train.pt", family="MLP-Mixer", domain="vision",
         reference="Tolstikhin et al. 2021; timm mlp_mixer.py (MixerBlock, Mlp, DropPath)",
         inputs=["x:f32[8,3,32,32]"], loss="cross_entropy", ranges={},
         random="DropPath: x.new_empty((B,1,1)).bernoulli_(keep_prob)"),
    dict(archive="detr_trace_train.pt", family="DETR", domain="vision",
         reference="Carion et al. 2020; facebookresearch/detr (PositionEmbeddingSine, Transformer, SetCriterion, "
                   "box_ops.generalized_box_iou)",
         inputs=["images:f32[8,3,32,32]", "target_classes:i64[8,8]", "target_boxes:f32[8,8,4]"], loss="output",
         ranges={"target_classes": "0..7 (7 = no object; class weights via empty_weight)",
                 "target_boxes": "0..1 (cx, cy, w, h with w, h > 0)"}),
    dict(archive="yolov5_trace_train.pt", family="YOLOv5", domain="vision",
         reference="ultralytics/yolov5 models/common.py (Focus, Conv, C3, SPPF) and models/yolo.py (Detect)",
         inputs=["x:f32[8,3,32,32]"], loss="mse", ranges={}),
    dict(archive="espcn_trace_train.pt", family="ESPCN", domain="vision",
         reference="Shi et al. 2016; pytorch/examples super_resolution/model.py",
         inputs=["x:f32[8,1,16,16]"], loss="mse", ranges={}),
    # ------------------------------------------------------------------ language
    dict(archive="mamba_trace_train.pt", family="Mamba", domain="language",
         reference="Gu and Dao 2023; johnma2006/mamba-minimal model.py (selective_scan)",
         inputs=["input_ids:i64[8,16]"], loss="cross_entropy", ranges={"input_ids": "0..63"}),
    dict(archive="rwkv_trace_train.pt", family="RWKV-4", domain="language",
         reference="Peng et al. 2023; BlinkDL/RWKV-LM RWKV-v4 model.py (time/channel mix) and the WKV kernel's "
                   "recurrence",
         inputs=["idx:i64[8,16]"], loss="cross_entropy", ranges={"idx": "0..63"}),
    dict(archive="bloom_trace_train.pt", family="BLOOM", domain="language",
         reference="BigScience 2022; HF transformers models/bloom/modeling_bloom.py (build_alibi_tensor, baddbmm)",
         inputs=["input_ids:i64[8,16]", "attention_mask:i64[8,16]"], loss="cross_entropy",
         ranges={"input_ids": "0..63", "attention_mask": "0..1 (1 = token; not an index, feeds cumsum)"}),
    dict(archive="gemma2_trace_train.pt", family="Gemma 2", domain="language",
         reference="Gemma Team 2024; HF transformers models/gemma2/modeling_gemma2.py",
         inputs=["input_ids:i64[8,16]"], loss="cross_entropy", ranges={"input_ids": "0..63"}),
    # ------------------------------------------------------------------ audio
    dict(archive="whisper_encoder_trace_train.pt", family="Whisper encoder", domain="audio",
         reference="Radford et al. 2022; openai/whisper whisper/model.py (AudioEncoder)",
         inputs=["mel:f32[8,16,32]"], loss="cross_entropy", ranges={}),
    dict(archive="wavenet_trace_train.pt", family="WaveNet", domain="audio",
         reference="van den Oord et al. 2016; r9y9/wavenet_vocoder (ResidualConv1dGLU), "
                   "torchaudio.functional.mu_law_encoding",
         inputs=["audio:f32[8,1,64]"], loss="cross_entropy",
         ranges={"audio": "-1..1 (clamped to it, then mu-law quantised to 0..15 and one_hot)"}),
    dict(archive="conformer_trace_train.pt", family="Conformer", domain="audio",
         reference="Gulati et al. 2020; torchaudio.models.Conformer",
         inputs=["features:f32[8,32,16]", "lengths:i64[8]"], loss="cross_entropy",
         ranges={"lengths": "1..32 (valid frames; not an index, compared with arange)"}),
    dict(archive="hifigan_trace_train.pt", family="HiFi-GAN generator", domain="audio",
         reference="Kong et al. 2020; jik876/hifi-gan models.py (Generator, ResBlock1)",
         inputs=["x:f32[8,16,8]"], loss="mse", ranges={}),
    # ------------------------------------------------------------------ recommendation
    dict(archive="dlrm_trace_train.pt", family="DLRM", domain="recommendation",
         reference="Naumov et al. 2019; facebookresearch/dlrm dlrm_s_pytorch.py",
         inputs=["dense_x:f32[8,4]", "sparse_ids:i64[8,3,4]"], loss="mse",
         ranges={"sparse_ids": "0..999999 (raw ids, hashed by % 20, % 16, % 12 before nn.EmbeddingBag)"}),
    dict(archive="deepfm_trace_train.pt", family="DeepFM", domain="recommendation",
         reference="Guo et al. 2017; rixwew/pytorch-fm torchfm/model/dfm.py, torchfm/layer.py",
         inputs=["x:i64[8,4]", "label:f32[8]"], loss="output",
         ranges={"x": "0..3 (column k takes 0..field_dims[k]-1, field_dims = (8, 12, 16, 4), offsets added before "
                      "the embedding; 0..3 fits every column)",
                 "label": "0..1"}),
    dict(archive="dcnv2_trace_train.pt", family="DCN-v2 (DCN-Mix)", domain="recommendation",
         reference="Wang et al. 2021; shenweichen/DeepCTR-Torch deepctr_torch/layers/interaction.py (CrossNetMix), "
                   "models/dcnmix.py",
         inputs=["dense:f32[8,4]", "sparse:i64[8,4]", "label:f32[8]"], loss="output",
         ranges={"sparse": "0..7 (column k takes 0..vocab[k]-1, vocab = (10, 20, 8, 12); 0..7 fits every column)",
                 "label": "0..1"}),
    # ------------------------------------------------------------------ generative
    dict(archive="vqvae_trace_train.pt", family="VQ-VAE", domain="generative",
         reference="van den Oord et al. 2017; zalandoresearch/pytorch-vq-vae vq-vae.ipynb (VectorQuantizer)",
         inputs=["x:f32[8,3,16,16]"], loss="output", ranges={}),
    dict(archive="dcgan_trace_train.pt", family="DCGAN", domain="generative",
         reference="Radford et al. 2016; pytorch/examples dcgan/main.py",
         inputs=["noise:f32[8,16,1,1]", "real:f32[8,3,16,16]"], loss="output", ranges={"real": "-1..1"}),
    dict(archive="realnvp_trace_train.pt", family="RealNVP", domain="generative",
         reference="Dinh et al. 2017; senya-ashukha/real-nvp-pytorch real-nvp-pytorch.ipynb",
         inputs=["x:f32[8,16]"], loss="output", ranges={}),
    dict(archive="dit_trace_train.pt", family="DiT", domain="generative",
         reference="Peebles and Xie 2023; facebookresearch/DiT models.py",
         inputs=["x:f32[8,4,8,8]", "t:i64[8]", "y:i64[8]"], loss="mse",
         ranges={"t": "0..999 (timestep; not an index, feeds the sinusoidal embedding)",
                 "y": "0..9 (class label; replaced by 10, the null class, where dropped, then an embedding index)"},
         random="classifier-free guidance label dropout: torch.rand(B) < 0.1"),
    dict(archive="nerf_trace_train.pt", family="NeRF", domain="generative",
         reference="Mildenhall et al. 2020; yenchenlin/nerf-pytorch run_nerf.py (render_rays, raw2outputs), "
                   "run_nerf_helpers.py",
         inputs=["rays_o:f32[8,3]", "rays_d:f32[8,3]"], loss="mse",
         ranges={"rays_d": "any non-zero vector (normalised inside)"},
         random="stratified sampling torch.rand(z_vals.shape); density noise torch.randn"),
    dict(archive="gumbel_vae_trace_train.pt", family="Gumbel-softmax VAE", domain="generative",
         reference="Jang et al. 2017; ericjang/gumbel-softmax (PyTorch ports), F.gumbel_softmax(hard=True)",
         inputs=["x:f32[8,32]"], loss="output", ranges={"x": "0..1 (binary cross-entropy target)"},
         random="F.gumbel_softmax: -empty_like().exponential_().log()"),
    # ------------------------------------------------------------------ graph
    dict(archive="schnet_trace_train.pt", family="SchNet", domain="graph",
         reference="Schütt et al. 2017; PyTorch Geometric torch_geometric/nn/models/schnet.py",
         inputs=["z:i64[8,12]", "pos:f32[8,12,3]"], loss="mse", ranges={"z": "0..9"}),
    dict(archive="gcn_trace_train.pt", family="GCN", domain="graph",
         reference="Kipf and Welling 2017; tkipf/pygcn pygcn/models.py, layers.py; PyG DenseGCNConv normalisation",
         inputs=["x:f32[16,8]", "adj:f32[16,16]"], loss="cross_entropy", ranges={"adj": "0..1 (symmetric 0/1)"}),
    dict(archive="graphsage_trace_train.pt", family="GraphSAGE", domain="graph",
         reference="Hamilton et al. 2017; williamleif/graphsage-simple graphsage/{model,encoders,aggregators}.py",
         inputs=["x:f32[16,8]", "adj:f32[16,16]"], loss="cross_entropy", ranges={"adj": "0..1 (symmetric 0/1)"},
         random="neighbour sampling: torch.rand_like(adj) scores, topk"),
    dict(archive="gin_trace_train.pt", family="GIN", domain="graph",
         reference="Xu et al. 2019; weihua916/powerful-gnns models/graphcnn.py, models/mlp.py",
         inputs=["x:f32[8,12,8]", "adj:f32[8,12,12]"], loss="cross_entropy", ranges={"adj": "0..1 (symmetric 0/1)"}),
    # ------------------------------------------------------------------ signal processing
    dict(archive="tcn_trace_train.pt", family="TCN", domain="signal",
         reference="Bai et al. 2018; locuslab/TCN TCN/tcn.py, TCN/mnist_pixel/model.py",
         inputs=["inputs:f32[8,1,32]"], loss="cross_entropy", ranges={}),
    dict(archive="sincnet_trace_train.pt", family="SincNet", domain="signal",
         reference="Ravanelli and Bengio 2018; mravanelli/SincNet dnn_models.py (SincConv_fast, LayerNorm, CNN)",
         inputs=["x:f32[8,128]"], loss="cross_entropy", ranges={}),
    dict(archive="nbeats_trace_train.pt", family="N-BEATS", domain="signal",
         reference="Oreshkin et al. 2020; ElementAI/N-BEATS models/nbeats.py",
         inputs=["x:f32[8,16]", "input_mask:f32[8,16]"], loss="mse", ranges={"input_mask": "0..1 (0/1)"}),
    # ------------------------------------------------------------------ multimodal
    dict(archive="clip_trace_train.pt", family="CLIP", domain="multimodal",
         reference="Radford et al. 2021; openai/CLIP clip/model.py, mlfoundations/open_clip loss.py (ClipLoss)",
         inputs=["image:f32[8,3,16,16]", "text:i64[8,8]"], loss="output",
         ranges={"text": "0..63 (token ids; each row's end-of-text token 63 must be its largest id, found by argmax)"}),
    dict(archive="film_vqa_trace_train.pt", family="FiLM (VQA)", domain="multimodal",
         reference="Perez et al. 2018; ethanjperez/film vr/models/film_gen.py, filmed_net.py",
         inputs=["image:f32[8,3,16,16]", "question:i64[8,8]"], loss="cross_entropy",
         ranges={"question": "0..31 (token ids, 0 = NULL padding; its count also indexes the GRU output)"}),
]

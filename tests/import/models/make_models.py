#!/usr/bin/python3
"""Generate tiny TorchScript archives + expected.json for the MAP importer tests.

Usage:  /usr/bin/python3 tests/import/models/make_models.py OUTDIR [--without-families]
        MAPD_DUMP_GRAPHS=1 ... also writes OUTDIR/<model>.graph.txt
        (the inlined graph of the re-loaded archive) for every model.

Needs torch (tested with Debian's python3-torch 1.13). Runs in a few seconds.
"""
import collections
import json
import os
import re
import sys
import warnings

import torch

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import audio  # noqa: E402
import families  # noqa: E402
import generative  # noqa: E402
import graph  # noqa: E402
import language  # noqa: E402
import llama  # noqa: E402
import misc  # noqa: E402
import multimodal  # noqa: E402
import nanogpt  # noqa: E402
import recsys  # noqa: E402
import resnet  # noqa: E402
import sigproc  # noqa: E402
import vision  # noqa: E402
import wild  # noqa: E402

BATCH, SEQ = 2, 16
DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
               torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32",
               torch.bool: "bool"}


def node_kinds(graph):
    """Counter of node kinds in graph, recursing into sub-blocks (If/Loop)."""
    counts = collections.Counter()

    def visit(block):
        for n in block.nodes():
            counts[n.kind()] += 1
            for b in n.blocks():
                visit(b)
    visit(graph)
    return counts


def graph_input_names(graph):
    """Debug names of graph inputs minus `self`, with a trailing '.N' stripped."""
    names = [re.sub(r"\.\d+$", "", i.debugName()) for i in graph.inputs()]
    assert names[0] == "self", names
    return names[1:]


def tensor_spec(t):
    return {"shape": list(t.shape), "dtype": DTYPE_NAMES[t.dtype]}


def flatten_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(flatten_outputs(o))
    return res


def tied_params(model):
    by_id = collections.OrderedDict()
    # (named_parameters(remove_duplicate=False) is not in torch 1.13)
    for mname, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            by_id.setdefault(id(p), []).append(f"{mname}.{pname}" if mname else pname)
    return [names for names in by_id.values() if len(names) > 1]


def build(outdir, fname, model, inputs, arg_names, mode, script=False,
          extra_files=None, extra=None):
    torch.manual_seed(0)
    model.train(mode == "train")
    # Example outputs, computed on the eager model (BN stats of train-mode
    # models get updated; only shapes/dtypes are recorded).
    with torch.no_grad():
        outputs = flatten_outputs(model(*inputs))
    if script:
        jit = torch.jit.script(model)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            # Train-mode dropout is random, so skip the trace re-run check.
            jit = torch.jit.trace(model, tuple(inputs), check_trace=(mode == "eval"))
    path = os.path.join(outdir, fname)
    torch.jit.save(jit, path, _extra_files=extra_files or {})

    loaded = torch.jit.load(path)
    graph = loaded.inlined_graph
    names = graph_input_names(graph)
    assert names == arg_names, (fname, names, arg_names)
    with torch.no_grad():
        loaded_outs = flatten_outputs(loaded(*inputs))
    assert [tensor_spec(t) for t in loaded_outs] == [tensor_spec(t) for t in outputs], fname
    num_params = sum(p.numel() for p in model.parameters())
    assert num_params == sum(p.numel() for p in loaded.parameters()), fname
    num_buffers = len(list(model.named_buffers()))
    assert num_buffers == len(list(loaded.named_buffers())), fname

    entry = {
        "inputs": [dict(name=n, **tensor_spec(t)) for n, t in zip(names, inputs)],
        "outputs": [tensor_spec(t) for t in outputs],
        "num_parameters": num_params,
        "num_buffers": num_buffers,
        "mode": mode,
        "tied": tied_params(model),
    }
    entry.update(extra or {})
    if os.environ.get("MAPD_DUMP_GRAPHS") == "1":
        with open(os.path.join(outdir, fname[:-3] + ".graph.txt"), "w") as f:
            f.write(str(graph))
    return entry, node_kinds(graph)


def add_families(add, gen):
    """The real-model families of families.py (one miniature per published architecture), traced
    in train mode on batch 8 (graph models: 16 nodes). Inputs come from gen, drawn after all the
    other models' inputs so that those archives do not change."""
    B = 8

    def fam(fname, cls, inputs, names):
        torch.manual_seed(0)
        add(fname, cls(), inputs, names, "train")

    def ids(high, *shape):
        return torch.randint(0, high, shape, generator=gen)

    def padded(tokens, lengths, end=None):
        """tokens with every position at or after lengths[b] set to 0; end (if given) at lengths - 1."""
        keep = torch.arange(tokens.size(1))[None, :] < lengths[:, None]
        tokens = torch.where(keep, tokens, torch.zeros_like(tokens))
        if end is not None:
            tokens[torch.arange(tokens.size(0)), lengths - 1] = end
        return tokens

    def sym_adj(*shape, p=0.25):
        a = (torch.rand(*shape, generator=gen) < p).float()
        a = ((a + a.transpose(-1, -2)) > 0).float()
        return a * (1 - torch.eye(shape[-1]))

    img = torch.randn(B, 3, 32, 32, generator=gen)
    tokens = ids(64, B, 16)

    # vision
    fam("mlp_mixer_trace_train.pt", vision.MLPMixer, [img], ["x"])
    fam("detr_trace_train.pt", vision.DETR,
        [img, ids(8, B, 8), torch.rand(B, 8, 4, generator=gen) * 0.5 + 0.25],
        ["images", "target_classes", "target_boxes"])
    fam("yolov5_trace_train.pt", vision.YOLOv5, [img], ["x"])
    fam("espcn_trace_train.pt", vision.ESPCN, [torch.rand(B, 1, 16, 16, generator=gen)], ["x"])
    # language
    fam("mamba_trace_train.pt", language.Mamba, [tokens], ["input_ids"])
    fam("rwkv_trace_train.pt", language.RWKV, [tokens], ["idx"])
    lengths = torch.randint(8, 17, (B,), generator=gen)
    mask = (torch.arange(16)[None, :] < lengths[:, None]).long()
    fam("bloom_trace_train.pt", language.Bloom, [tokens, mask], ["input_ids", "attention_mask"])
    fam("gemma2_trace_train.pt", language.Gemma2, [tokens], ["input_ids"])
    # audio
    fam("whisper_encoder_trace_train.pt", audio.WhisperEncoder, [torch.randn(B, 16, 32, generator=gen)], ["mel"])
    fam("wavenet_trace_train.pt", audio.WaveNet, [torch.rand(B, 1, 64, generator=gen) * 2 - 1], ["audio"])
    fam("conformer_trace_train.pt", audio.Conformer,
        [torch.randn(B, 32, 16, generator=gen), torch.randint(1, 33, (B,), generator=gen)], ["features", "lengths"])
    fam("hifigan_trace_train.pt", audio.HiFiGANGenerator, [torch.randn(B, 16, 8, generator=gen)], ["x"])
    # recommendation
    fam("dlrm_trace_train.pt", recsys.DLRM,
        [torch.randn(B, 4, generator=gen), ids(10 ** 6, B, 3, 4)], ["dense_x", "sparse_ids"])
    fields = torch.stack([ids(d, B) for d in (8, 12, 16, 4)], 1)
    clicks = ids(2, B).float()
    fam("deepfm_trace_train.pt", recsys.DeepFM, [fields, clicks], ["x", "label"])
    sparse = torch.stack([ids(d, B) for d in (10, 20, 8, 12)], 1)
    fam("dcnv2_trace_train.pt", recsys.DCNv2, [torch.randn(B, 4, generator=gen), sparse, clicks],
        ["dense", "sparse", "label"])
    # generative
    fam("vqvae_trace_train.pt", generative.VQVAE, [torch.rand(B, 3, 16, 16, generator=gen)], ["x"])
    fam("dcgan_trace_train.pt", generative.DCGAN,
        [torch.randn(B, 16, 1, 1, generator=gen), torch.rand(B, 3, 16, 16, generator=gen) * 2 - 1], ["noise", "real"])
    fam("realnvp_trace_train.pt", generative.RealNVP, [torch.randn(B, 16, generator=gen)], ["x"])
    fam("dit_trace_train.pt", generative.DiT, [torch.randn(B, 4, 8, 8, generator=gen), ids(1000, B), ids(10, B)],
        ["x", "t", "y"])
    fam("nerf_trace_train.pt", generative.NeRF, [torch.randn(B, 3, generator=gen), torch.randn(B, 3, generator=gen)],
        ["rays_o", "rays_d"])
    fam("gumbel_vae_trace_train.pt", generative.GumbelSoftmaxVAE, [torch.rand(B, 32, generator=gen)], ["x"])
    # graph
    fam("schnet_trace_train.pt", graph.SchNet, [ids(10, B, 12), torch.randn(B, 12, 3, generator=gen) * 1.5],
        ["z", "pos"])
    nodes, adj = torch.randn(16, 8, generator=gen), sym_adj(16, 16)
    fam("gcn_trace_train.pt", graph.GCN, [nodes, adj], ["x", "adj"])
    fam("graphsage_trace_train.pt", graph.GraphSAGE, [nodes, adj], ["x", "adj"])
    fam("gin_trace_train.pt", graph.GIN, [torch.randn(B, 12, 8, generator=gen), sym_adj(B, 12, 12, p=0.15)],
        ["x", "adj"])
    # signal processing
    fam("tcn_trace_train.pt", sigproc.TCN, [torch.randn(B, 1, 32, generator=gen)], ["inputs"])
    fam("sincnet_trace_train.pt", sigproc.SincNet, [torch.randn(B, 128, generator=gen)], ["x"])
    fam("nbeats_trace_train.pt", sigproc.NBeats,
        [torch.randn(B, 16, generator=gen), (torch.rand(B, 16, generator=gen) > 0.1).float()], ["x", "input_mask"])
    # multimodal
    text = padded(torch.randint(1, 63, (B, 8), generator=gen), torch.randint(2, 9, (B,), generator=gen), end=63)
    fam("clip_trace_train.pt", multimodal.CLIP, [torch.randn(B, 3, 16, 16, generator=gen), text], ["image", "text"])
    question = padded(torch.randint(1, 32, (B, 8), generator=gen), torch.randint(3, 9, (B,), generator=gen))
    fam("film_vqa_trace_train.pt", multimodal.FiLMVQA, [torch.randn(B, 3, 16, 16, generator=gen), question],
        ["image", "question"])


def check_families(expected):
    """families.FAMILIES and the archives agree: one entry per archive, the same input specs."""
    dt = {"float32": "f32", "float64": "f64", "int64": "i64", "bool": "bool"}
    archives = [f["archive"] for f in families.FAMILIES]
    assert len(set(archives)) == len(archives), archives
    for fam in families.FAMILIES:
        entry = expected[fam["archive"]]
        specs = [f"{i['name']}:{dt[i['dtype']]}[{','.join(map(str, i['shape']))}]" for i in entry["inputs"]]
        assert specs == fam["inputs"], (fam["archive"], specs, fam["inputs"])
        assert fam["loss"] in ("cross_entropy", "mse", "output"), fam
        outs = entry["outputs"]
        assert (fam["loss"] == "output") == (len(outs) == 1 and outs[0]["shape"] == []), (fam["archive"], outs)
        assert set(fam["ranges"]) <= {i["name"] for i in entry["inputs"]}, fam


def main(argv):
    # --without-families: only the archives the importer's and runtime's C++ tests read (each test
    # process makes its own; the 30 families take most of the time).
    families = "--without-families" not in argv
    argv = [a for a in argv if a != "--without-families"]
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 96, (BATCH, SEQ), dtype=torch.int64, generator=gen)
    targets = torch.randint(0, 96, (BATCH, SEQ), dtype=torch.int64, generator=gen)
    images = torch.randn(BATCH, 3, 32, 32, generator=gen)
    mlp_x = torch.randn(4, 8, generator=gen)
    uns_x = torch.randn(4, 8, generator=gen)

    expected, kinds = {}, {}

    def add(fname, *args, **kw):
        expected[fname], kinds[fname] = build(outdir, fname, *args, **kw)

    def gpt(cls):
        torch.manual_seed(0)
        return cls(nanogpt.GPTConfig())

    add("nanogpt_trace_train.pt", gpt(nanogpt.GPT), [idx], ["idx"], "train")
    add("nanogpt_trace_eval.pt", gpt(nanogpt.GPT), [idx], ["idx"], "eval")
    add("nanogpt_loss_trace_train.pt", gpt(nanogpt.GPTWithLoss), [idx, targets],
        ["idx", "targets"], "train")

    torch.manual_seed(0)
    add("llama_trace_train.pt", llama.Transformer(llama.ModelArgs()), [idx], ["tokens"],
        "train")

    for mode in ("train", "eval"):
        torch.manual_seed(0)
        m = resnet.TinyResNet()
        extra = {"buffers": resnet.bn_state_buffers(m)} if mode == "train" else None
        add(f"resnet_trace_{mode}.pt", m, [images], ["x"], mode, extra=extra)

    torch.manual_seed(0)
    add("mobile_trace_train.pt", misc.MobileBlock(), [images], ["x"], "train")

    torch.manual_seed(0)
    add("convnext_block_trace_train.pt", misc.ConvNeXtBlock(), [images], ["x"], "train")

    torch.manual_seed(0)
    add("swin_block_trace_train.pt", misc.SwinBlock(), [images], ["x"], "train")

    torch.manual_seed(0)
    seq_x = torch.randn(BATCH, SEQ, 8, generator=gen)
    add("folded_masks_trace_train.pt", misc.FoldedMasks(), [seq_x], ["x"], "train")
    torch.manual_seed(0)
    add("einsum_attention_trace_train.pt", misc.EinsumAttention(), [seq_x], ["x"], "train")
    torch.manual_seed(0)
    add("recurrent_trace_train.pt", misc.RecurrentClassifier(), [seq_x], ["x"], "train")
    torch.manual_seed(0)
    wide_x = torch.randn(BATCH, SEQ, 16, generator=gen)
    add("t5_encoder_trace_train.pt", misc.T5Encoder(), [wide_x], ["x"], "train")
    torch.manual_seed(0)
    add("bert_trace_train.pt", misc.BertEncoder(), [idx], ["idx"], "train")
    torch.manual_seed(0)
    add("neox_trace_train.pt", misc.NeoXLM(), [idx], ["idx"], "train")
    torch.manual_seed(0)
    add("vae_trace_train.pt", misc.VAE(), [torch.rand(4, 32, generator=gen)], ["x"], "train")

    torch.manual_seed(0)
    add("audio_encoder_trace_train.pt", wild.AudioEncoder(), [torch.randn(BATCH, 1, 410, generator=gen)], ["x"],
        "train")
    torch.manual_seed(0)
    steps = torch.randint(0, 1000, (BATCH,), generator=gen).float()
    add("diffusion_unet_trace_train.pt", wild.DiffusionUNet(), [torch.randn(BATCH, 3, 16, 16, generator=gen), steps],
        ["x", "t"], "train")
    torch.manual_seed(0)
    add("topk_moe_trace_train.pt", wild.TopKMoE(), [seq_x], ["x"], "train")
    torch.manual_seed(0)
    edges = torch.randint(0, 12, (2, 30), generator=gen)
    add("message_passing_trace_train.pt", wild.MessagePassingGNN(), [torch.randn(12, 8, generator=gen), edges],
        ["x", "edge_index"], "train")

    torch.manual_seed(0)
    add("torch_layers_trace_train.pt", misc.TorchLayers(), [torch.randn(BATCH, 12, 16, generator=gen),
                                                            torch.randn(BATCH, 10, 16, generator=gen)],
        ["src", "tgt"], "train")
    torch.manual_seed(0)
    add("signal_ops_script.pt", misc.SignalOps(), [torch.randn(BATCH, 2, 16, generator=gen)], ["x"], "train",
        script=True)

    torch.manual_seed(0)
    spec = {"inputs": [{"name": "x", "dtype": "float32", "shape": [4, 8]}]}
    add("mlp_script.pt", misc.ScriptMLP(), [mlp_x], ["x"], "eval", script=True,
        extra_files={"mapd_inputs.json": json.dumps(spec)})

    torch.manual_seed(0)
    add("generic_ops.pt", misc.GenericOps(), [uns_x], ["x"], "eval", extra={"generic_ops": misc.GENERIC_OPS})
    got = {k: kinds["generic_ops.pt"][k] for k in misc.GENERIC_OPS}
    assert got == misc.GENERIC_OPS, got
    torch.manual_seed(0)
    add("refused.pt", misc.Refused(), [uns_x], ["x"], "eval")

    if families:
        add_families(add, gen)
        check_families(expected)

    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")
    if os.environ.get("MAPD_DUMP_GRAPHS") == "1":
        with open(os.path.join(outdir, "node_kinds.json"), "w") as f:
            json.dump({k: dict(sorted(v.items())) for k, v in kinds.items()}, f, indent=2)
            f.write("\n")
    print(f"wrote {len(expected)} models to {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

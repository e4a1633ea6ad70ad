"""The models of the GPU check, built the same way on both sides: here (traced for MAP's
predictions, with Debian's PyTorch 1.13) and on the GPU machine (trained by its PyTorch 2.x, and
traced again for `mapctl run`). One definition, so the prediction and the measurement are of the
same network.

A case is a dict (it travels in the predictions file):
  name            unique, e.g. "gpt-0.5b bf16 mb4"
  family          gpt | llama | torchvision
  config          the family's constructor arguments (torchvision: {"arch": NAME, **kwargs})
  batch           the global batch of one step
  seq / image     sequence length (gpt, llama) or image side (torchvision)
  precision       fp32 | bf16 (mixed: bf16 weights, activations and gradients; fp32 masters,
                  optimizer states and loss, as MAP's --precision bf16)
  micro_batches   forward/backward passes per step, gradients accumulated
  recompute       true: every repeated layer recomputed in backward (MAP's recompute=full)
"""
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "import", "models"))
import llama  # noqa: E402
import nanogpt  # noqa: E402

# ~0.5B parameters each: what one GPU trains in fp32 and bf16 with AdamW.
GPT_05B = dict(block_size=1024, vocab_size=50304, n_layer=24, n_head=20, n_embd=1280, dropout=0.0, bias=True)
LLAMA_05B = dict(dim=1280, n_layers=24, n_heads=20, n_kv_heads=4, vocab_size=32000, hidden_dim=3456, max_seq_len=1024)
# The CPU rehearsal's stand-ins: the same code paths at a size two cores train in seconds.
GPT_SMALL = dict(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128, dropout=0.0, bias=True)
LLAMA_SMALL = dict(dim=128, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512, hidden_dim=344, max_seq_len=64)
VIT_SMALL = dict(arch="VisionTransformer", image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64,
                 mlp_dim=128, num_classes=10)


def _case(name, family, config, batch, precision, micro_batches=1, recompute=False, seq=None, image=None):
    c = dict(name=name, family=family, config=config, batch=batch, precision=precision, micro_batches=micro_batches,
             recompute=recompute)
    if seq is not None:
        c["seq"] = seq
    if image is not None:
        c["image"] = image
    return c


def cases(device):
    """The list for a GPU (device "cuda"), or its small stand-in for the CPU rehearsal."""
    if device == "cuda":
        gpt, lm, seq, img, big_b, small_b = GPT_05B, LLAMA_05B, 1024, 224, 64, 4
        vit = dict(arch="vit_b_16")
        convnext = dict(arch="convnext_tiny")
        resnet = dict(arch="resnet50")
        vit_b, convnext_b = 32, 32
    else:
        gpt, lm, seq, img, big_b, small_b = GPT_SMALL, LLAMA_SMALL, 64, 64, 8, 8
        vit, convnext, resnet = VIT_SMALL, dict(arch="convnext_tiny", num_classes=10), dict(arch="resnet50", num_classes=10)
        vit_b, convnext_b = 8, 4
    gpt_name = "gpt-0.5b" if device == "cuda" else "gpt-small"
    llama_name = "llama-0.5b" if device == "cuda" else "llama-small"
    vit_image = 224 if device == "cuda" else 32
    return [
        _case(f"{gpt_name} fp32", "gpt", gpt, small_b, "fp32", seq=seq),
        _case(f"{gpt_name} bf16", "gpt", gpt, small_b, "bf16", seq=seq),
        _case(f"{gpt_name} bf16 mb4", "gpt", gpt, 4 * small_b, "bf16", micro_batches=4, seq=seq),
        _case(f"{gpt_name} bf16 recompute", "gpt", gpt, small_b, "bf16", recompute=True, seq=seq),
        _case(f"{llama_name} fp32", "llama", lm, small_b, "fp32", seq=seq),
        _case(f"{llama_name} bf16", "llama", lm, small_b, "bf16", seq=seq),
        _case(f"{llama_name} bf16 recompute", "llama", lm, small_b, "bf16", recompute=True, seq=seq),
        _case("resnet50 fp32", "torchvision", resnet, big_b, "fp32", image=img),
        _case("resnet50 bf16", "torchvision", resnet, big_b, "bf16", image=img),
        _case(f"{vit.get('arch')} bf16", "torchvision", vit, vit_b, "bf16", image=vit_image),
        _case("convnext_tiny fp32", "torchvision", convnext, convnext_b, "fp32", image=img),
    ]


def build(case):
    """The case's module, fp32, weights from seed 0, in training mode."""
    torch.manual_seed(0)
    cfg = dict(case["config"])
    if case["family"] == "gpt":
        m = nanogpt.GPT(nanogpt.GPTConfig(**cfg))
    elif case["family"] == "llama":
        m = llama.Transformer(llama.ModelArgs(**cfg))
    else:
        import torchvision
        m = getattr(torchvision.models, cfg.pop("arch"))(**cfg)
    return m.train()


def classes(case):
    if case["family"] in ("gpt", "llama"):
        return case["config"]["vocab_size"]
    return case["config"].get("num_classes", 1000)


def one_device_runtime(case):
    """Whether `mapctl run` trains the case on one process (part b): micro-batches and
    recomputation need the rank runtime, whose programs compute on the CPU."""
    return case["micro_batches"] == 1 and not case["recompute"]


def batch(case, samples, seed=1):
    """(inputs, targets) of `samples` samples, fp32 images or int64 tokens, on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    if case["family"] in ("gpt", "llama"):
        shape = (samples, case["seq"])
        return (torch.randint(0, classes(case), shape, generator=gen), torch.randint(0, classes(case), shape, generator=gen))
    x = torch.randn(samples, 3, case["image"], case["image"], generator=gen)
    return x, torch.randint(0, classes(case), (samples,), generator=gen)


def input_spec(case):
    """MAP's --input for the traced module (its forward's argument name)."""
    b = case["batch"]
    if case["family"] == "gpt":
        return f"idx:i64[{b},{case['seq']}]"
    if case["family"] == "llama":
        return f"tokens:i64[{b},{case['seq']}]"
    return f"x:f32[{b},3,{case['image']},{case['image']}]"


def model_key(case):
    """Cases that share a traced module (the same family, config and sample shape)."""
    return (case["family"], tuple(sorted((k, str(v)) for k, v in case["config"].items())), case.get("seq"), case.get("image"))


def trace(module, case, path, samples=2):
    """A TorchScript trace of `module` at a small batch (MAP's --input gives the real one)."""
    import warnings
    x, _ = batch(case, samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.trace(module, (x,), check_trace=False).save(path)

#!/usr/bin/python3
"""Export a PyTorch model for MAP: trace it and embed its input spec.

    /usr/bin/python3 examples/export_nanogpt.py OUT.pt

The model is the nanoGPT-style GPT used by MAP's importer tests (tied embedding and head
weights, causal mask, dropout), at a small size. `mapctl inspect OUT.pt` then needs no
--input, because the spec travels inside the archive as the extra file mapd_inputs.json.
"""
import json
import os
import sys

import warnings

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "import", "models"))
import nanogpt  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    torch.manual_seed(0)
    config = nanogpt.GPTConfig(block_size=64, vocab_size=512, n_layer=4, n_head=4, n_embd=128, dropout=0.1)
    model = nanogpt.GPT(config).train()
    idx = torch.randint(0, config.vocab_size, (2, 64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape arithmetic is folded by MAP
        traced = torch.jit.trace(model, (idx,), check_trace=False)
    spec = {"inputs": [{"name": "idx", "dtype": "int64", "shape": list(idx.shape)}]}
    torch.jit.save(traced, sys.argv[1], _extra_files={"mapd_inputs.json": json.dumps(spec)})
    n_params = sum(p.numel() for p in model.parameters())
    print(f"wrote {sys.argv[1]}: PyTorch reports {n_params} parameters, logits {list(model(idx).shape)}")


if __name__ == "__main__":
    main()

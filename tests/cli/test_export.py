"""mapctl export: a checkpoint's blocks and shards gathered into a PyTorch state dict that the
original nn.Module takes with load_state_dict(strict=True), and that gives MAP's numbers; and
--init-from, the other way: PyTorch's weights in, PyTorch's loss out.

Each run trains on an npy batch of exactly B samples, so every step's batch is the same samples
(a permutation of them) and the loss MAP reports at step k+1 is the loss of step k's weights on
that batch: what PyTorch computes from the export of step k."""
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from conftest import SOURCE_DIR, run_mapctl

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "import", "models"))
import llama  # noqa: E402
import nanogpt  # noqa: E402
import resnet  # noqa: E402

TRAIN = ("--steps", "4", "--optimizer", "momentum", "--lr", "0.05", "--checkpoint-every", "3", "--log-every", "1")


def _trace(model, example, path):
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.jit.trace(model, (example,), check_trace=False).save(str(path))


def _gpt_with_batch(tmp_path, dropout=0.0):
    """A traced nanoGPT (seed 0) and an npy batch of exactly B samples."""
    torch.manual_seed(0)
    config = nanogpt.GPTConfig(dropout=dropout)
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, config.vocab_size, (4, 16), generator=gen)
    targets = torch.randint(0, config.vocab_size, (4, 16), generator=gen)
    _trace(nanogpt.GPT(config), idx, tmp_path / "gpt.pt")
    np.save(tmp_path / "idx.npy", idx.numpy())
    np.save(tmp_path / "targets.npy", targets.numpy())
    model_args = (str(tmp_path / "gpt.pt"), "--input", "idx:i64[4,16]", "--data",
                  f"npy:{tmp_path / 'idx.npy'},{tmp_path / 'targets.npy'}")
    return config, idx, targets, model_args


def _train_and_export(tmp_path, name, model_args, flags):
    """Trains 4 steps (checkpoints at 3 and 4); returns MAP's losses and the exports of both."""
    ck = tmp_path / f"ck-{name}"
    r = run_mapctl("run", *model_args, *TRAIN, *flags, "--checkpoint-dir", str(ck), "-o", "json", check=0)
    losses = [s["loss"] for s in json.loads(r.stdout)["steps"]]
    exports = []
    for step in (3, 4):
        out = tmp_path / f"{name}-{step}.pt"
        e = run_mapctl("export", str(ck), "--step", str(step), "-o", str(out), "--format", "json", check=0)
        assert json.loads(e.stdout)["step"] == step, e.stdout
        exports.append(torch.load(out))
    return losses, exports


def test_an_exported_nanogpt_loads_strictly_and_gives_maps_loss_under_data_tensor_and_zero2(tmp_path):
    config, idx, targets, model_args = _gpt_with_batch(tmp_path)
    for name, flags in (("dp", ("--strategy", "dp", "--ranks", "2")), ("tp", ("--strategy", "tp", "--ranks", "2")),
                        ("2x2-zero2", ("--mesh", "2x2", "--zero", "2", "--ranks", "4"))):
        losses, (third, fourth) = _train_and_export(tmp_path, name, model_args, flags)
        assert "lm_head.weight" in third and third["lm_head.weight"].data_ptr() == third["transformer.wte.weight"].data_ptr()
        module = nanogpt.GPT(config)
        module.load_state_dict(third, strict=True)
        with torch.no_grad():
            logits = module(idx)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)).item()
        assert abs(loss - losses[3]) <= 1e-4 * abs(losses[3]), (name, loss, losses)
        module.load_state_dict(fourth, strict=True)  # and the last step's


def test_an_exported_resnet_carries_its_batch_norm_statistics(tmp_path):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    images = torch.randn(8, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 10, (8,), generator=gen)
    _trace(resnet.TinyResNet(), images, tmp_path / "resnet.pt")
    np.save(tmp_path / "images.npy", images.numpy())
    np.save(tmp_path / "labels.npy", labels.numpy())
    model_args = (str(tmp_path / "resnet.pt"), "--input", "x:f32[8,3,32,32]", "--data",
                  f"npy:{tmp_path / 'images.npy'},{tmp_path / 'labels.npy'}")
    losses, (third, fourth) = _train_and_export(tmp_path, "resnet", model_args, ("--ranks", "4"))
    # The counters go on from the traced module's (its trace ran a forward: 1), a step each.
    traced = torch.jit.load(str(tmp_path / "resnet.pt")).state_dict()["bn1.num_batches_tracked"].item()
    assert (third["bn1.num_batches_tracked"].item(), fourth["bn1.num_batches_tracked"].item()) == (traced + 3, traced + 4)
    module = resnet.TinyResNet()
    module.load_state_dict(third, strict=True)
    module.train()
    with torch.no_grad():
        loss = F.cross_entropy(module(images), labels).item()  # and the running statistics move on a step
    assert abs(loss - losses[3]) <= 1e-4 * abs(losses[3]), (loss, losses)
    after = module.state_dict()
    for key in fourth:
        if "running_" in key or "num_batches" in key:
            assert torch.allclose(after[key].double(), fourth[key].double(), rtol=1e-5, atol=1e-6), key


def test_export_errors_name_what_to_do(tmp_path):
    r = run_mapctl("export", str(tmp_path), "-o", str(tmp_path / "w.pt"))
    assert r.returncode == 1 and f"no checkpoint committed in {tmp_path}" in r.stderr, r.stderr
    r = run_mapctl("export", "12", "-o", str(tmp_path / "w.pt"))
    assert r.returncode == 1 and "not built yet" in r.stderr and "job-12/checkpoints" in r.stderr, r.stderr
    # A job's ranks spread over two workers' directories: one of them alone lacks ranks.
    ck = tmp_path / "ck"
    run_mapctl("run", "gpt2:layers=1,hidden=16,heads=2,vocab=32,seq=8,batch=4", "--ranks", "2", "--steps", "2",
               "--checkpoint-dir", str(ck), check=0)
    (ck / "step-00000002" / "rank_1.pb").unlink()
    r = run_mapctl("export", str(ck), "-o", str(tmp_path / "w.pt"))
    assert r.returncode == 1 and "no directory given holds rank(s) 1 of step 2" in r.stderr, r.stderr


def _first_loss(*args):
    r = run_mapctl("run", *args, "--steps", "1", "--optimizer", "sgd", "-o", "json", check=0)
    return json.loads(r.stdout)["steps"][0]["loss"]


def test_init_from_pytorchs_weights_gives_pytorchs_first_loss(tmp_path):
    """Weights PyTorch made (another seed than the trace's) into the traced model: MAP's first
    loss is PyTorch's within 1e-5, on one process and on ranks under tensor parallelism; a zoo
    ResNet-50 takes torchvision's own ResNet-50 weights the same way."""
    config, idx, targets, model_args = _gpt_with_batch(tmp_path)
    torch.manual_seed(5)
    module = nanogpt.GPT(config)
    torch.save(module.state_dict(), tmp_path / "pretrained.pt")
    with torch.no_grad():
        logits = module(idx)
        want = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)).item()
    traced = _first_loss(*model_args)
    for flags in ((), ("--ranks", "2", "--strategy", "tp")):
        got = _first_loss(*model_args, *flags, "--init-from", str(tmp_path / "pretrained.pt"))
        assert abs(got - want) <= 1e-5 * abs(want), (flags, got, want)
    assert abs(traced - want) > 1e-3, (traced, want)  # the trace's own weights give another loss

    import torchvision
    torch.manual_seed(0)
    tv = torchvision.models.resnet50(num_classes=10)
    torch.save(tv.state_dict(), tmp_path / "resnet50.pt")
    gen = torch.Generator().manual_seed(2)
    # (At 32x32 and batch 4 the last stage's batch norms see 4 values a channel, where the two
    # ways of computing their variance part at 1e-4; at 64x64 and batch 8 both agree to 3e-6.)
    images, labels = torch.randn(8, 3, 64, 64, generator=gen), torch.randint(0, 10, (8,), generator=gen)
    np.save(tmp_path / "images.npy", images.numpy())
    np.save(tmp_path / "labels.npy", labels.numpy())
    tv.train()
    with torch.no_grad():
        want = F.cross_entropy(tv(images), labels).item()
    got = _first_loss("resnet50:image=64,batch=8,classes=10", "--init-from", str(tmp_path / "resnet50.pt"), "--data",
                      f"npy:{tmp_path / 'images.npy'},{tmp_path / 'labels.npy'}")
    assert abs(got - want) <= 1e-5 * abs(want), (got, want)


def test_init_from_a_state_dict_without_non_persistent_buffers(tmp_path):
    """A LLaMA's RoPE tables are non-persistent buffers: module.state_dict() leaves them out, as
    load_state_dict expects; MAP keeps the trace's values for them and gives PyTorch's loss."""
    torch.manual_seed(0)
    module = llama.Transformer(llama.ModelArgs())
    tokens = torch.randint(0, 96, (4, 16), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, 96, (4, 16), generator=torch.Generator().manual_seed(2))
    _trace(module, tokens, tmp_path / "llama.pt")
    torch.manual_seed(3)
    other = llama.Transformer(llama.ModelArgs())
    state = other.state_dict()
    assert "freqs_cos" not in state and any(n == "freqs_cos" for n, _ in other.named_buffers())
    torch.save(state, tmp_path / "weights.pt")
    np.save(tmp_path / "tokens.npy", tokens.numpy())
    np.save(tmp_path / "targets.npy", targets.numpy())
    with torch.no_grad():
        logits = other(tokens)
        want = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1)).item()
    got = _first_loss(str(tmp_path / "llama.pt"), "--input", "tokens:i64[4,16]", "--init-from", str(tmp_path / "weights.pt"),
                      "--data", f"npy:{tmp_path / 'tokens.npy'},{tmp_path / 'targets.npy'}")
    assert abs(got - want) <= 1e-5 * abs(want), (got, want)


def test_init_from_names_what_does_not_fit(tmp_path):
    config, _, _, model_args = _gpt_with_batch(tmp_path)
    state = nanogpt.GPT(config).state_dict()
    renamed = dict(state)
    renamed["transformer.h.0.mlp.c_fc.weight_"] = renamed.pop("transformer.h.0.mlp.c_fc.weight")
    torch.save(renamed, tmp_path / "renamed.pt")
    r = run_mapctl("run", *model_args, "--steps", "1", "--init-from", str(tmp_path / "renamed.pt"))
    assert r.returncode == 1 and "missing: transformer.h.0.mlp.c_fc.weight" in r.stderr, r.stderr
    assert "not in the model: transformer.h.0.mlp.c_fc.weight_" in r.stderr, r.stderr
    wrong = dict(state)
    wrong["transformer.wpe.weight"] = torch.zeros(8, 32)
    torch.save(wrong, tmp_path / "wrong.pt")
    r = run_mapctl("run", *model_args, "--steps", "1", "--init-from", str(tmp_path / "wrong.pt"))
    assert r.returncode == 1 and "'transformer.wpe.weight' is f32[8,32], the model's f32[16,32]" in r.stderr, r.stderr
    r = run_mapctl("run", *model_args, "--steps", "1", "--init-from", model_args[0])
    assert r.returncode == 1 and "TorchScript archive" in r.stderr, r.stderr
    (tmp_path / "notes.txt").write_text("not weights")
    r = run_mapctl("run", *model_args, "--steps", "1", "--init-from", str(tmp_path / "notes.txt"))
    assert r.returncode == 1 and "is not a torch.save file" in r.stderr, r.stderr


def test_evaluation_under_a_plan_is_pytorchs_eval_loss_and_touches_nothing(tmp_path):
    """--eval-every: the mean loss over the evaluation batches, forward only and dropout off —
    a nanoGPT with dropout 0.1 on a 2x2 mesh with ZeRO-2 under warm-up + cosine: its last
    evaluation equals PyTorch's eval-mode loss with the exported weights within 1e-4; one
    process evaluates the same; the training losses are those of a run without evaluation, and
    the evaluation loss falls."""
    config, idx, targets, model_args = _gpt_with_batch(tmp_path, dropout=0.1)
    data = model_args[-1]
    train = ("--steps", "12", "--optimizer", "adamw", "--lr", "0.01", "--lr-schedule", "cosine", "--warmup-steps", "2",
             "--log-every", "1")
    evaluate = ("--eval-every", "4", "--eval-data", data, "--eval-batches", "2")
    plan = ("--ranks", "4", "--mesh", "2x2", "--zero", "2")
    ck = tmp_path / "ck"
    r = json.loads(run_mapctl("run", *model_args, *train, *evaluate, *plan, "--checkpoint-dir", str(ck),
                              "--checkpoint-every", "12", "-o", "json", check=0).stdout)
    assert [e["step"] for e in r["evals"]] == [4, 8, 12], r["evals"]
    # Forward only: rank 0's peak while evaluating stays within its step's predicted peak.
    assert all(0 < e["peak_bytes"] <= r["per_rank"][0]["predicted_peak_bytes"] for e in r["evals"]), (r["evals"], r["per_rank"])
    assert r["evals"][-1]["loss"] < r["evals"][0]["loss"], r["evals"]
    plain = json.loads(run_mapctl("run", *model_args, *train, *plan, "-o", "json", check=0).stdout)
    assert [s["loss"] for s in plain["steps"]] == [s["loss"] for s in r["steps"]]  # evaluation changed nothing
    one = json.loads(run_mapctl("run", *model_args, *train, *evaluate, "-o", "json", check=0).stdout)
    for a, b in zip(one["evals"], r["evals"]):
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * abs(b["loss"]), (one["evals"], r["evals"])
    out = tmp_path / "weights.pt"
    run_mapctl("export", str(ck), "-o", str(out), check=0)
    module = nanogpt.GPT(config)
    module.load_state_dict(torch.load(out), strict=True)
    module.eval()
    with torch.no_grad():
        logits = module(idx)
        want = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)).item()
    assert abs(want - r["evals"][-1]["loss"]) <= 1e-4 * abs(want), (want, r["evals"])
    bad = run_mapctl("run", "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4", "--ranks", "2", "--pipeline-stages", "2",
                     "--eval-every", "1", "--steps", "1")
    assert bad.returncode == 1 and "evaluation under pipeline stages is not built yet" in bad.stderr, bad.stderr
    bad = run_mapctl("run", *model_args, "--eval-every", "1", "--eval-data", "npy:")
    assert bad.returncode == 1 and "eval_data: data 'npy:'" in bad.stderr, bad.stderr

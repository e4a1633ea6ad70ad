"""mapctl run --ranks N: local rank processes under a plan reproduce one process; failures are named."""
import json
import os
import subprocess
import tempfile
import time

import pytest

from conftest import SOURCE_DIR, run_mapctl

GPT = "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"
TRAIN = ("--steps", "10", "--optimizer", "momentum", "--lr", "0.1")


def _json_run(*args):
    r = run_mapctl("run", *args, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _assert_matches_one_process_and_prediction(r, what):
    """Losses and every final parameter block within 1e-4 of one process; each rank's measured
    peak within 10% of its program's profiled prediction."""
    assert r["reference_max_relative_loss_difference"] < 1e-4, (what, r)
    assert r["reference_parameter_blocks_compared"] > 0, (what, r)
    assert r["reference_max_parameter_difference"] < 1e-4, (what, r)
    for p in r["per_rank"]:
        m, pred = p["measured_peak_bytes"], p["predicted_peak_bytes"]
        assert m > 0 and abs(pred - m) <= 0.10 * m, (what, p)
        assert p["measured_step_seconds"] > 0 and p["predicted_step_seconds"] > 0, (what, p)


def test_data_parallel_tensor_parallel_and_map_reproduce_one_process():
    for extra in (("--ranks", "4", "--strategy", "dp"), ("--ranks", "4", "--strategy", "tp"),
                  ("--ranks", "4", "--mesh", "2x2"), ("--ranks", "4"), ("--ranks", "4", "--zero", "1"),
                  ("--ranks", "4", "--mesh", "2x2", "--zero", "2"), ("--ranks", "4", "--strategy", "tp", "--recompute", "all")):
        r = _json_run(GPT, *TRAIN, *extra, "--check-reference")
        assert r["ranks"] == 4 and len(r["steps"]) == 10, extra
        assert len(r["per_rank"]) == 4
        _assert_matches_one_process_and_prediction(r, extra)
        assert r["predicted_peak_bytes"] > 0
        # Throughput: the global batch's tokens (4 × 8) over rank 0's step time.
        s = r["steps"][-1]
        assert abs(s["tokens_per_second"] - 32 / s["seconds"]) < 1e-6 * s["tokens_per_second"]


def test_a_saved_plan_runs(tmp_path):
    plan = tmp_path / "plan.pb"
    run_mapctl("plan", GPT, "--mesh", "2x2", "--zero", "0", "--device-type", "cpu", "--save", str(plan), check=0)
    r = _json_run(*TRAIN, "--plan", str(plan), "--check-reference")
    assert r["mesh"] == [2, 2] and r["reference_max_relative_loss_difference"] < 1e-4
    # A ZeRO-2 plan runs as saved, and a ZeRO-3 one (parameters sharded too, gathered for use).
    run_mapctl("plan", GPT, "--mesh", "2x2", "--zero", "2", "--device-type", "cpu", "--save", str(plan), check=0)
    r2 = _json_run(*TRAIN, "--plan", str(plan), "--check-reference")
    assert r2["reference_max_parameter_difference"] < 1e-4
    peak = lambda run: max(p["measured_peak_bytes"] for p in run["per_rank"])
    assert peak(r2) < 0.8 * peak(r), (peak(r2), peak(r))  # shards of state and gradients
    run_mapctl("plan", GPT, "--mesh", "4", "--zero", "3", "--device-type", "cpu", "--save", str(plan), check=0)
    r3 = _json_run(*TRAIN, "--plan", str(plan), "--check-reference")
    assert r3["zero_stage"] == 3 and r3["reference_max_parameter_difference"] < 1e-4, r3
    assert r3["reference_max_relative_loss_difference"] < 1e-4, r3
    for p in r3["per_rank"]:
        assert abs(p["measured_peak_bytes"] - p["predicted_peak_bytes"]) <= 0.1 * p["predicted_peak_bytes"], p


def test_a_killed_rank_is_named_quickly():
    start = time.monotonic()
    r = run_mapctl("run", GPT, "--ranks", "4", "--steps", "10", env_extra={"MAPD_FAULT": "crash:1:3"})
    assert r.returncode == 1
    assert "rank 1 was killed by signal" in r.stderr, r.stderr
    assert time.monotonic() - start < 60


def test_a_hung_rank_is_named():
    start = time.monotonic()
    r = run_mapctl("run", GPT, "--ranks", "4", "--steps", "10", "--rank-timeout", "5",
                   env_extra={"MAPD_FAULT": "hang:2:2"})
    assert r.returncode == 1
    assert "rank 2 stopped responding before step 2" in r.stderr, r.stderr
    assert time.monotonic() - start < 60


def test_errors():
    r = run_mapctl("run", "--steps", "2")
    assert r.returncode == 1 and "give a MODEL, or --plan FILE" in r.stderr
    # NCCL ranks need a GPU each (and a build with NCCL): this machine's answer says which is missing.
    gpus = run_mapctl("devices", "-o", "json")
    visible = len(json.loads(gpus.stdout).get("devices", [])) if gpus.returncode == 0 else 0
    if visible < 4:
        r = run_mapctl("run", GPT, "--ranks", "4", "--device", "cuda", "--steps", "1")
        assert r.returncode == 1, r.stderr
        assert ("4 ranks need 4 GPUs" in r.stderr and f"{visible} are visible" in r.stderr) or "CUDA" in r.stderr, r.stderr
    r = run_mapctl("run", GPT, "--ranks", "4", "--device", "cuda:1")
    assert r.returncode == 1 and "use cpu (Gloo) or cuda (NCCL" in r.stderr
    r = run_mapctl("run", GPT, "--ranks", "4", "--recompute", "h.9")
    assert r.returncode == 1 and "no operator belongs to layer 'h.9'" in r.stderr
    r = run_mapctl("run", GPT, "--ranks", "4", "--zero", "4")
    assert r.returncode == 1 and "--zero '4' is not auto, 0, 1, 2 or 3" in r.stderr, r.stderr
    r = run_mapctl("run", GPT, "--ranks", "3", "--strategy", "dp")
    assert r.returncode == 1 and "does not split over 3 devices" in r.stderr
    # A baseline runs with its own ZeRO stage: data parallelism's are 0 and 3 (FSDP).
    r = run_mapctl("run", GPT, "--ranks", "2", "--strategy", "dp", "--zero", "2")
    assert r.returncode == 1 and "the data-parallel baselines are ZeRO-0 (plain) and ZeRO-3 (FSDP: --zero 3)" in r.stderr, r.stderr
    assert "(--strategy map --zero 2)" in r.stderr, r.stderr
    r = run_mapctl("run", GPT, "--ranks", "2", "--strategy", "tp", "--zero", "1")
    assert r.returncode == 1 and "no data axis to shard optimizer states over" in r.stderr, r.stderr
    r = run_mapctl("run", GPT, "--ranks", "4", "--batch-norm", "ghost")
    assert r.returncode != 0 and "--batch-norm" in r.stderr, r.stderr
    r = run_mapctl("run", "--plan", "plan.pb", "--batch-norm", "local")
    assert r.returncode == 1 and "--batch-norm local with --plan" in r.stderr, r.stderr


def test_resume_after_a_crash_reproduces_the_uninterrupted_losses(tmp_path):
    # Under a learning-rate schedule: the resumed run goes on with it where it stopped.
    adam = ("--ranks", "4", "--steps", "10", "--optimizer", "adamw", "--lr", "0.01", "--lr-schedule", "cosine",
            "--warmup-steps", "3", "--min-lr", "0.001")
    full = _json_run(GPT, *adam)
    ckpt = tmp_path / "ckpt"
    r = run_mapctl("run", GPT, *adam, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "5",
                   env_extra={"MAPD_FAULT": "crash:2:8"})
    assert r.returncode == 1 and "rank 2 was killed" in r.stderr
    assert (ckpt / "LATEST").read_text() == "5"
    assert sorted(p.name for p in (ckpt / "step-00000005").iterdir()) == \
        ["meta.pb", "rank_0.pb", "rank_1.pb", "rank_2.pb", "rank_3.pb"]
    resumed = _json_run(GPT, *adam, "--resume", str(ckpt))
    assert [s["step"] for s in resumed["steps"]] == [6, 7, 8, 9, 10]
    for a, b in zip(full["steps"][5:], resumed["steps"]):
        assert abs(a["loss"] - b["loss"]) <= 1e-6 * abs(a["loss"]), (a, b)
        assert a["lr"] == b["lr"] and b["lr"] < 0.01, (a, b)
    # Nothing to resume from is an error that says so (another plan's checkpoint is resharded:
    # test_reshard.py).
    r = run_mapctl("run", GPT, *adam, "--resume", str(tmp_path / "none"))
    assert r.returncode == 1 and "no committed checkpoint" in r.stderr


@pytest.mark.long  # slow: the long form runs it (scripts/test.sh --long)
def test_traced_models_go_through_the_same_path(models):
    """The importer's traced test models (tests/import/models/make_models.py) on 4 ranks."""
    out, _ = models
    cases = [
        ("llama_trace_train.pt", ["--input", "tokens:i64[4,16]", "--strategy", "dp"]),
        ("llama_trace_train.pt", ["--input", "tokens:i64[4,16]", "--strategy", "tp"]),
        ("nanogpt_loss_trace_train.pt", ["--input", "idx:i64[4,16]", "--input", "targets:i64[4,16]", "--mesh", "2x2"]),
        ("resnet_trace_train.pt", ["--input", "x:f32[4,3,32,32]", "--strategy", "dp"]),
        ("resnet_trace_train.pt", ["--input", "x:f32[8,3,32,32]", "--strategy", "dp", "--batch-norm", "local"]),
        ("mlp_script.pt", ["--input", "x:f32[4,8]", "--strategy", "tp"]),
        ("mobile_trace_train.pt", ["--input", "x:f32[4,3,32,32]"]),  # ReLU6 in place, clamps: MAP's plan
        ("convnext_block_trace_train.pt", ["--input", "x:f32[8,3,32,32]", "--strategy", "dp"]),  # stochastic depth
        ("swin_block_trace_train.pt", ["--input", "x:f32[8,3,32,32]", "--mesh", "2x2"]),  # shifted windows
        ("einsum_attention_trace_train.pt", ["--input", "x:f32[8,64,8]", "--strategy", "tp"]),  # einsum
        ("recurrent_trace_train.pt", ["--input", "x:f32[8,16,8]", "--strategy", "dp"]),  # LSTM, GRU
        ("t5_encoder_trace_train.pt", ["--input", "x:f32[8,32,16]", "--mesh", "2x2"]),  # bucketed relative bias
        ("vae_trace_train.pt", ["--input", "x:f32[16,32]", "--strategy", "dp"]),  # randn_like, loss output
        ("folded_masks_trace_train.pt", ["--input", "x:f32[8,64,8]", "--mesh", "2x2"]),  # folded mask and tables
        ("audio_encoder_trace_train.pt", ["--input", "x:f32[8,1,410]", "--strategy", "dp"]),  # conv1d, group norm
        ("diffusion_unet_trace_train.pt", ["--input", "x:f32[8,3,16,16]", "--input", "t:f32[8]"]),  # conv_transpose2d
        ("topk_moe_trace_train.pt", ["--input", "x:f32[8,16,8]", "--strategy", "tp"]),  # topk, scatter, one_hot
        ("topk_moe_trace_train.pt", ["--input", "x:f32[8,16,8]", "--strategy", "dp", "--micro-batches", "2"]),
        ("message_passing_trace_train.pt", ["--input", "x:f32[12,8]", "--input", "edge_index:i64[2,30]",
                                            "--strategy", "tp"]),  # gather, index_add, scatter_add
        ("torch_layers_trace_train.pt", ["--input", "src:f32[8,12,16]", "--input", "tgt:f32[8,10,16]",
                                         "--mesh", "2x2"]),  # nn.TransformerEncoder/Decoder, MultiheadAttention
        ("signal_ops_script.pt", ["--input", "x:f32[8,2,16]", "--strategy", "dp"]),  # scripted 1-D ops
    ]
    for name, flags in cases:
        r = _json_run(str(out / name), *flags, "--ranks", "4", *TRAIN[:2], "--optimizer", "momentum", "--lr", "0.01",
                      "--check-reference")
        _assert_matches_one_process_and_prediction(r, (name, flags))
    # An imported model in bf16: its f32 archive data made into bf16 parameters (DataRef.stored_dtype).
    r = _json_run(str(out / "llama_trace_train.pt"), "--input", "tokens:i64[4,16]", "--strategy", "dp", "--ranks", "4",
                  *TRAIN[:2], "--optimizer", "momentum", "--lr", "0.01", "--precision", "bf16", "--check-reference")
    assert r["precision"] == "bf16" and r["reference_max_relative_loss_difference"] < 2e-2, r


def test_a_data_parallel_step_makes_two_all_reduces_whatever_its_batch_norms(models):
    """Data parallelism with --batch-norm local: the gradients' one bucket, then the loss and the
    six batch norms' running-statistic sums coalesced into one all-reduce, after backward (not
    one per batch norm and one for the loss: 8 round trips, ~5 ms each on 4 ranks here); one
    process's result all the same. Micro-batches sum their passes' losses in one all-reduce too."""
    out, _ = models
    r = _json_run(str(out / "resnet_trace_train.pt"), "--input", "x:f32[8,3,32,32]", "--strategy", "dp",
                  "--batch-norm", "local", "--ranks", "2", "--steps", "3", "--optimizer", "momentum", "--lr", "0.01",
                  "--check-reference")
    _assert_matches_one_process_and_prediction(r, "resnet, batch norm local")
    assert [s["collectives"]["all_reduce"]["calls"] for s in r["steps"]] == [2, 2, 2], r["steps"]
    # MAP's plan on the mesh splits the running statistics by channel: their reduce-scatters join
    # the same all-reduce after backward (each rank keeping its chunk), not one collective each.
    r = _json_run(str(out / "resnet_trace_train.pt"), "--input", "x:f32[8,3,32,32]", "--mesh", "4", "--zero", "0",
                  "--batch-norm", "local", "--ranks", "4", "--steps", "3", "--optimizer", "momentum", "--lr", "0.01",
                  "--check-reference", "--log-every", "1")
    _assert_matches_one_process_and_prediction(r, "resnet, batch norm local, MAP's plan")
    assert [sorted(s["collectives"]) for s in r["steps"]] == [["all_reduce"]] * 3, r["steps"]
    assert [s["collectives"]["all_reduce"]["calls"] for s in r["steps"]] == [2, 2, 2], r["steps"]
    gpt = ("--strategy", "dp", "--ranks", "2", "--steps", "2", "--gradient-buckets", "off", "--log-every", "1")
    one = _json_run(GPT, *gpt)
    two = _json_run(GPT, *gpt, "--micro-batches", "2")
    calls = lambda run: [s["collectives"]["all_reduce"]["calls"] for s in run["steps"]]  # noqa: E731
    assert calls(two) == calls(one), (calls(one), calls(two))  # the gradients' and one for the loss


def test_a_cap_changes_maps_plan_to_recompute_layers_and_it_holds():
    """Where activations dominate (4 layers, sequence 64), MAP's plan without a tight budget is
    plain data parallelism; at 1 MiB a rank data parallelism runs out of memory, and MAP's plan
    for that budget — ZeRO with layers the planner chose to recompute — trains under the cap on
    every rank, within 1e-4 of one process."""
    gpt = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8"
    common = ("--ranks", "4", "--steps", "3", "--lr", "0.01", "--device-type", "cpu")
    free = _json_run(gpt, *common)
    assert free["recomputed_layers"] == [] and free["zero_stage"] == 0, free["plan"]
    assert max(p["measured_peak_bytes"] for p in free["per_rank"]) > 2 * 2**20
    capped = (*common, "--memory-per-device", "1MiB")
    r = run_mapctl("run", gpt, *capped, "--strategy", "dp")
    assert r.returncode == 1 and "out of memory" in r.stderr and "[RESOURCE_EXHAUSTED]" in r.stderr, r.stderr
    planned = _json_run(gpt, *capped, "--check-reference")
    assert planned["recomputed_layers"], planned["plan"]
    assert set(planned["recomputed_layers"]) <= {"h.0", "h.1", "h.2", "h.3"}
    for p in planned["per_rank"]:
        assert 0 < p["measured_peak_bytes"] <= 2**20, p
    _assert_matches_one_process_and_prediction(planned, "MAP at 1 MiB")
    # The plan saved with `mapctl plan` names the layers and `run PLAN` recomputes them.
    with tempfile.TemporaryDirectory() as d:
        saved = os.path.join(d, "plan.pb")
        r = run_mapctl("plan", gpt, "--devices", "4", "--device-type", "cpu", "--memory-per-device", "1MiB", "--zero", "2",
                       "--save", saved)
        assert r.returncode == 0, r.stderr
        assert "Recompute:    " in r.stdout and "layer(s): h." in r.stdout, r.stdout
        again = _json_run("--plan", saved, "--steps", "2", "--lr", "0.01", "--device-type", "cpu")
        assert again["recomputed_layers"] == planned["recomputed_layers"], (again["plan"], planned["plan"])


def test_a_memory_cap_that_data_parallelism_passes_is_kept_by_maps_plan():
    """--memory-per-device is also a cap each rank enforces: data parallelism's replicated weights,
    gradients and momentum (72 MiB a rank) fail at 40 MB with out-of-memory naming the rank and
    the bytes; MAP's plan for the same budget trains and stays under it on every rank."""
    mlp = "mlp:in=512,hidden=2048,layers=2,out=8,batch=8"
    common = ("--ranks", "4", "--steps", "3", "--optimizer", "momentum", "--lr", "0.01", "--memory-per-device", "40MB")
    r = run_mapctl("run", mlp, *common, "--strategy", "dp")
    assert r.returncode == 1, r.stdout
    assert "out of memory: allocating" in r.stderr and "cap of 40000000 bytes" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("[RESOURCE_EXHAUSTED]") and "on rank" in r.stderr, r.stderr
    planned = _json_run(mlp, *common)
    assert len(planned["steps"]) == 3
    for p in planned["per_rank"]:
        assert 0 < p["measured_peak_bytes"] < 40_000_000, p
    # One process is planned against the budget the same way: its weights, gradients and momentum
    # (63 MB) fit no plan on one device, and it says so before training, naming the least.
    r = run_mapctl("run", mlp, "--steps", "1", "--memory-per-device", "40MB")
    assert r.returncode == 1 and "no plan fits 38.1 MiB per device on 1 device(s)" in r.stderr, r.stderr
    assert "the least memory any plan of this model on 1 device(s) needs is" in r.stderr, r.stderr


def test_micro_batches_reproduce_one_process_and_fit_a_cap_one_pass_cannot():
    """--micro-batches N runs N passes a step on slices of the batch, gradients accumulated: the
    losses and final parameters are one process's on the whole batch, and each rank's peak is
    its program's prediction. Under a cap at which data parallelism in one pass runs out of
    memory, --micro-batches auto lets MAP's plan run in passes and train under it."""
    for extra in (("--ranks", "2", "--strategy", "dp", "--micro-batches", "2"),
                  ("--ranks", "4", "--mesh", "2x2", "--micro-batches", "2"),
                  ("--ranks", "2", "--mesh", "2", "--micro-batches", "2", "--zero", "2"),
                  ("--ranks", "2", "--strategy", "dp", "--micro-batches", "2", "--zero", "3"),  # the FSDP baseline
                  ("--ranks", "2", "--micro-batches", "4", "--strategy", "tp")):
        r = _json_run(GPT, *TRAIN, *extra, "--check-reference")
        assert r["micro_batches"] == int(extra[extra.index("--micro-batches") + 1]), (extra, r["micro_batches"])
        if "--zero" in extra:
            assert r["zero_stage"] == int(extra[extra.index("--zero") + 1]), (extra, r["zero_stage"])
        _assert_matches_one_process_and_prediction(r, extra)
    long_gpt = "gpt2:layers=2,hidden=64,heads=4,vocab=64,seq=256,batch=16"
    capped = ("--ranks", "4", "--steps", "3", "--memory-per-device", "10MiB", "--recompute", "off")
    one = run_mapctl("run", long_gpt, *capped, "--strategy", "dp")
    assert one.returncode == 1 and "out of memory: allocating" in one.stderr, one.stderr
    assert "cap of 10485760 bytes" in one.stderr and one.stderr.rstrip().endswith("[RESOURCE_EXHAUSTED]"), one.stderr
    refused = run_mapctl("run", long_gpt, *capped)
    assert refused.returncode == 1 and "no plan fits 10.0 MiB per device on 4 device(s)" in refused.stderr, refused.stderr
    auto = _json_run(long_gpt, *capped, "--micro-batches", "auto", "--check-reference")
    assert auto["micro_batches"] > 1 and len(auto["steps"]) == 3, auto["micro_batches"]
    assert auto["reference_max_relative_loss_difference"] < 1e-4, auto
    for p in auto["per_rank"]:
        assert 0 < p["measured_peak_bytes"] <= 10 << 20, p
        assert abs(p["predicted_peak_bytes"] - p["measured_peak_bytes"]) <= 0.05 * p["measured_peak_bytes"], p
    bad = run_mapctl("run", GPT, "--ranks", "2", "--micro-batches", "3", "--steps", "1")
    assert bad.returncode != 0 and "3 micro-batches do not divide the global batch of 4" in bad.stderr, bad.stderr


def test_bf16_mixed_precision_on_ranks_matches_one_bf16_process_and_its_prediction(tmp_path):
    """--precision bf16 trains the bf16 graph (fp32 masters, states and loss) on ranks: losses and
    final blocks within 2e-2 of one process training it, the loss falls, and each rank's peak is
    within 5% of its program's prediction. A saved bf16 plan runs as bf16; the CPU default is fp32.
    SGD with momentum, as the fp32 equivalence runs: AdamW turns rounding noise into full steps
    for parameters whose gradient is zero analytically (GPT-2's key bias), in fp32 as in bf16."""
    gpt = "gpt2:layers=2,hidden=64,heads=4,vocab=64,seq=64,batch=8"
    for extra in (("--strategy", "dp"), ("--strategy", "tp"), ("--mesh", "2x2", "--zero", "2"),
                  ("--mesh", "4", "--zero", "3", "--micro-batches", "2")):
        r = _json_run(gpt, *TRAIN, "--ranks", "4", "--precision", "bf16", *extra,
                      "--check-reference")
        assert r["precision"] == "bf16", (extra, r)
        assert r["reference_max_relative_loss_difference"] < 2e-2, (extra, r)
        assert r["reference_parameter_blocks_compared"] > 0 and r["reference_max_parameter_difference"] < 2e-2, (extra, r)
        assert r["steps"][-1]["loss"] < r["steps"][0]["loss"], (extra, r["steps"])
        for p in r["per_rank"]:
            m, pred = p["measured_peak_bytes"], p["predicted_peak_bytes"]
            assert m > 0 and abs(pred - m) <= 0.05 * m, (extra, p)
    fp32 = _json_run(gpt, "--steps", "2", "--ranks", "2", "--strategy", "dp")
    assert fp32["precision"] == "fp32", fp32  # auto on --device-type cpu
    bf16 = _json_run(gpt, "--steps", "2", "--ranks", "2", "--strategy", "dp", "--precision", "bf16")
    peak = lambda run: max(p["measured_peak_bytes"] for p in run["per_rank"])
    assert peak(bf16) < 0.8 * peak(fp32), (peak(bf16), peak(fp32))
    plan = tmp_path / "plan.pb"
    run_mapctl("plan", gpt, "--mesh", "2x2", "--device-type", "cpu", "--precision", "bf16", "--save", str(plan), check=0)
    saved = _json_run(*TRAIN, "--plan", str(plan), "--check-reference")
    assert saved["precision"] == "bf16" and saved["reference_max_relative_loss_difference"] < 2e-2, saved
    clash = run_mapctl("run", "--steps", "1", "--plan", str(plan), "--precision", "fp32")
    assert clash.returncode != 0 and "planned for bf16" in clash.stderr, clash.stderr
    bad = run_mapctl("run", gpt, "--steps", "1", "--precision", "fp8")
    assert bad.returncode != 0 and "precision 'fp8' is not one of auto, fp32, bf16" in bad.stderr, bad.stderr


def _children(pid):
    """Pids of the live (not zombie) processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_pipeline_stages_reproduce_one_process_and_their_memory(tmp_path):
    """--pipeline-stages N: the layers cut into N stages, each on ranks/N ranks, micro-batches
    streamed through them by 1F1B over Gloo point-to-point — a GPT whose embedding is tied to its
    LM head (the tied gradient summed between the first and last stage) and a LLaMA: the losses
    and every final parameter block of one process within 1e-5, each rank's measured peak within
    10% of its program's prediction, and stage i's peak falling with its micro-batches in flight
    (4 − i on 4 stages). The same for interleaved 1F1B (--pin schedule=interleaved:2), and
    resuming either after a crash."""
    gpt4 = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=8,batch=8"
    llama4 = "llama2-7b:layers=4,hidden=32,heads=4,kv_heads=2,ffn=64,vocab=64,seq=8,batch=8"
    for model, extra in ((gpt4, ("--pipeline-stages", "2")), (gpt4, ("--pipeline-stages", "4")),
                         (llama4, ("--pipeline-stages", "2", "--zero", "2")), (llama4, ("--pipeline-stages", "4", "--recompute", "all"))):
        r = _json_run(model, *TRAIN, "--ranks", "4", "--micro-batches", "4", *extra, "--check-reference")
        stages = int(extra[1])
        assert r["pipeline_stages"] == stages and len(r["stages"]) == stages and r["schedule"] == "1F1B", r
        assert r["ranks"] == 4 and r["micro_batches"] == 4 and 0 < r["bubble_fraction"] < 1, r
        assert r["reference_max_relative_loss_difference"] < 1e-5, (extra, r)
        assert r["reference_max_parameter_difference"] < 1e-5, (extra, r)
        _assert_matches_one_process_and_prediction(r, (model, extra))
        if stages == 4 and "--recompute" not in extra:
            peaks = [p["measured_peak_bytes"] for p in sorted(r["per_rank"], key=lambda p: p["rank"])]
            predicted = [p["predicted_peak_bytes"] for p in sorted(r["per_rank"], key=lambda p: p["rank"])]
            assert peaks == sorted(peaks, reverse=True) and predicted == sorted(predicted, reverse=True), (peaks, predicted)
    # Interleaved 1F1B, 2 stages x 2 chunks a device (over data-parallel pairs, and over
    # tensor-parallel ones): the GPT's embedding in stage 0's first chunk tied to its LM head in
    # stage 1's second, stage 1's first chunk sending on to stage 0's second; each rank's peak
    # (its two chunks' state and the passes the schedule keeps in flight) as predicted.
    for model, pin in ((gpt4, "pp=2,schedule=interleaved:2"), (llama4, "pp=2,tp=2,schedule=interleaved:2")):
        r = _json_run(model, *TRAIN, "--ranks", "4", "--micro-batches", "4", "--pin", pin, "--check-reference")
        assert r["schedule"] == "interleaved 1F1B, 2 chunks a device" and r["virtual_stages"] == 2, r
        assert len(r["stages"]) == 2 and all(s.count(",") == 1 for s in r["stages"]), r["stages"]
        assert r["reference_max_relative_loss_difference"] < 1e-5, (pin, r)
        assert r["reference_max_parameter_difference"] < 1e-5, (pin, r)
        _assert_matches_one_process_and_prediction(r, (model, pin))
    # A crashed stage's run resumes from the last checkpoint (each rank's own stage's blocks and
    # optimizer state; interleaved, both its chunks') with the uninterrupted losses.
    for schedule in ("--pipeline-stages", "2"), ("--pin", "pp=2,schedule=interleaved:2"):
        pp = ("--ranks", "4", *schedule, "--micro-batches", "4", "--steps", "10", "--optimizer", "adamw", "--lr", "0.01")
        full = _json_run(gpt4, *pp)
        ckpt = tmp_path / f"ckpt{len(schedule[1])}"
        r = run_mapctl("run", gpt4, *pp, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "5", env_extra={"MAPD_FAULT": "crash:2:8"})
        assert r.returncode == 1 and "rank 2 was killed" in r.stderr, r.stderr
        resumed = _json_run(gpt4, *pp, "--resume", str(ckpt))
        assert [s["step"] for s in resumed["steps"]] == [6, 7, 8, 9, 10]
        for a, b in zip(full["steps"][5:], resumed["steps"]):
            assert abs(a["loss"] - b["loss"]) <= 1e-6 * abs(a["loss"]), (schedule, a, b)
            assert a["lr"] == b["lr"] == 0.01, (a, b)  # each stage reports its step's rate
    # Without --micro-batches a pipeline takes the planner's count (at least one per stage).
    r = _json_run(gpt4, *TRAIN, "--ranks", "4", "--pipeline-stages", "2")
    assert r["pipeline_stages"] == 2 and r["micro_batches"] >= 2, r
    # Stages that cannot be are refused, saying why.
    bad = run_mapctl("run", gpt4, "--ranks", "4", "--pipeline-stages", "2", "--strategy", "dp", "--steps", "1")
    assert bad.returncode == 1 and "pipeline stages come with MAP's plan" in bad.stderr, bad.stderr
    bad = run_mapctl("run", gpt4, "--ranks", "4", "--pipeline-stages", "3", "--steps", "1")
    assert bad.returncode == 1 and "3 pipeline stages do not divide 4 devices" in bad.stderr, bad.stderr
    bad = run_mapctl("run", gpt4, "--ranks", "4", "--pipeline-stages", "x", "--steps", "1")
    assert bad.returncode == 1 and "--pipeline-stages 'x' is not auto or a count" in bad.stderr, bad.stderr


def test_ranks_die_with_their_launcher():
    """A killed launcher (here `mapctl run`; a killed mapd-worker alike) takes its ranks with it, so
    none is left holding its peers in a collective. Rank 0 hangs before step 2 and rank 1 waits
    for it in a collective: neither writes again, so only the launcher's death can end them."""
    import signal
    import subprocess
    from conftest import MAPCTL
    proc = subprocess.Popen([MAPCTL, "run", GPT, "--ranks", "2", "--steps", "1000", "--rank-timeout", "600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, MAPD_FAULT="hang:0:2"))
    try:
        deadline = time.monotonic() + 60
        ranks = []
        while time.monotonic() < deadline and len(ranks) < 2:
            ranks = _children(proc.pid)
            time.sleep(0.2)
        assert len(ranks) == 2, ranks
        time.sleep(3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(r) for r in ranks):
            time.sleep(0.1)
        assert not any(_alive(r) for r in ranks), [r for r in ranks if _alive(r)]
    finally:
        proc.kill()
        proc.wait()


def test_check_reference_tells_adams_rounding_noise_from_a_broken_plan(models, tmp_path):
    """nanoGPT with biases under the default AdamW on 4 ranks (MAP's tensor-parallel plan for a
    tight budget): the key part of each qkv bias has a gradient that is zero but for rounding,
    which AdamW turns into steps of about lr; the check compares those elements within
    2 x lr x steps and the rest within a hundredth of lr x steps, and passes. The same plan with
    one row-parallel linear's all-reduce taken out (its Partial output claimed Replicated) fails."""
    out, _ = models
    gpt = str(out / "nanogpt_trace_train.pt")
    plan, broken = tmp_path / "plan.pb", tmp_path / "broken.pb"
    run_mapctl("plan", gpt, "--input", "idx:i64[4,16]", "--mesh", "4", "--device-type", "cpu", "--zero", "0",
               "--memory-per-device", "300KiB", "--save", str(plan), check=0)
    proto = ["protoc", f"-I{os.path.join(SOURCE_DIR, 'proto')}", "mapd/v1/plan.proto"]
    with open(plan, "rb") as f:
        text = subprocess.run(proto[:2] + ["--decode=mapd.v1.Plan"] + proto[2:], stdin=f, capture_output=True, check=True,
                              timeout=60).stdout.decode()
    at = text.index('node: "transformer.h.0.mlp.c_proj/linear"')
    p = text.index('output_placements: "P"', at)
    assert p - at < 300, text[at:at + 400]  # the node's own output
    tampered = text[:p] + 'output_placements: "R"' + text[p + len('output_placements: "P"'):]
    with open(broken, "wb") as f:
        f.write(subprocess.run(proto[:2] + ["--encode=mapd.v1.Plan"] + proto[2:], input=tampered.encode(),
                               capture_output=True, check=True, timeout=60).stdout)

    r = _json_run("--plan", str(plan), "--steps", "20", "--check-reference")
    assert r["reference_max_relative_loss_difference"] < 1e-5, r
    assert r["reference_noise_driven_elements"] >= 2 * 32, r  # each layer's 32 key-bias elements at least
    assert r["reference_noise_driven_max_difference"] < r["reference_noise_driven_tolerance"] == 2 * 1e-3 * 20, r
    assert r["reference_max_parameter_difference"] < r["reference_parameter_tolerance"] == 1e-2 * 1e-3 * 20, r
    text_run = run_mapctl("run", "--plan", str(plan), "--steps", "20", "--check-reference", check=0).stdout
    assert "gradient that is zero but for rounding" in text_run and "2 x lr x steps" in text_run, text_run

    bad = run_mapctl("run", "--plan", str(broken), "--steps", "20", "--check-reference", check=1)
    assert "differs from one process's" in bad.stderr or "losses differ" in bad.stderr, bad.stderr


def _save_image_classes(directory, n=64, classes=10, seed=0):
    """n 3x32x32 images of `classes` classes (a fixed pattern each, plus noise) and their labels,
    saved with numpy.save as float32 and int64: what a user saves from torchvision."""
    script = (f"import numpy as np; r = np.random.default_rng({seed}); y = r.integers(0, {classes}, size={n}); "
              f"p = r.standard_normal(({classes}, 3, 32, 32)).astype(np.float32); "
              f"x = p[y] + 0.5 * r.standard_normal(({n}, 3, 32, 32)).astype(np.float32); "
              f"np.save('{directory}/images.npy', x); np.save('{directory}/labels.npy', y)")
    subprocess.run(["/usr/bin/python3", "-c", script], check=True, timeout=60)
    return directory / "images.npy", directory / "labels.npy"


def test_a_cnn_trains_from_numpy_arrays_on_four_ranks(models, tmp_path):
    """npy:IMAGES,LABELS: a traced ResNet trains on saved arrays on 4 ranks under MAP's plan, every
    rank drawing the same global batches and keeping its block (one process's losses), and its
    loss falls; arrays that do not fit the model are refused by name."""
    out, _ = models
    images, labels = _save_image_classes(tmp_path)
    model = (str(out / "resnet_trace_train.pt"), "--input", "x:f32[8,3,32,32]")
    r = _json_run(*model, "--data", f"npy:{images},{labels}", "--ranks", "4", "--steps", "30", "--optimizer", "adamw",
                  "--lr", "0.003", "--log-every", "1", "--check-reference")
    _assert_matches_one_process_and_prediction(r, "resnet from npy")
    losses = [s["loss"] for s in r["steps"]]
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < 0.85 * sum(losses[:5]) / 5, losses
    # Another seed draws other batches from the same arrays.
    other = _json_run(*model, "--data", f"npy:{images},{labels}", "--steps", "2", "--seed", "1", "--log-every", "1")
    assert other["steps"][0]["loss"] != losses[0], (other["steps"], losses[0])
    bad = run_mapctl("run", *model, "--data", f"npy:{labels},{labels}", "--steps", "1")
    assert bad.returncode != 0 and f"array '{labels}' has shape [64]; input 'x' is f32[8,3,32,32]" in bad.stderr, bad.stderr
    bad = run_mapctl("run", *model, "--data", f"npy:{images},{labels},{labels}", "--steps", "1")
    assert bad.returncode != 0 and "too many files" in bad.stderr, bad.stderr

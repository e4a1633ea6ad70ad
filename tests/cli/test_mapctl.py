"""mapctl end to end: help, models, inspect, import, and clear errors for bad input."""
import json
import math
import os

import pytest

from conftest import SOURCE_DIR, run_mapctl

# Published parameter counts (see docs/zoo.md); mapctl must be within 0.5%.
PUBLISHED = {
    "gpt2": 124.4e6,
    "gpt2-xl": 1557.6e6,
    "llama2-7b": 6738.4e6,
    "llama2-70b": 68976.6e6,
    "llama3-8b": 8030.3e6,
    "gpt3-175b": 174.6e9,
    "bert-large": 335e6,
    "vit-huge": 632e6,
    "resnet50": 25.56e6,
}


def test_help_lists_commands():
    out = run_mapctl("--help", check=0).stdout
    for cmd in ("models", "ops", "inspect", "import", "devices", "profile", "run", "calibrate", "plan"):
        assert cmd in out
    sub = run_mapctl("inspect", "--help", check=0).stdout
    assert "MODEL" in sub and "--input" in sub


def test_bad_usage_exits_2():
    assert run_mapctl("inspect").returncode == 2
    assert run_mapctl("frobnicate").returncode == 2
    assert run_mapctl("inspect", "gpt2", "-o", "xml").returncode == 2


def test_every_command_that_prints_objects_takes_o_yaml():
    """-o json and -o yaml are the same document (kubectl's habit), on the local commands too."""
    import yaml
    gpt = "gpt2:layers=1,hidden=32,heads=2,vocab=64,seq=8,batch=2"
    for args in (("models",), ("ops",), ("devices",), ("inspect", gpt), ("profile", gpt), ("plan", gpt, "--devices", "2"),
                 ("run", gpt, "--steps", "2")):
        as_json = json.loads(run_mapctl(*args, "-o", "json", check=0).stdout)
        as_yaml = yaml.safe_load(run_mapctl(*args, "-o", "yaml", check=0).stdout)
        assert type(as_yaml) is type(as_json) and len(as_yaml) == len(as_json), args
        if isinstance(as_json, dict):
            assert set(as_yaml) == set(as_json), (args, set(as_yaml) ^ set(as_json))


def test_models_table_and_json():
    out = run_mapctl("models", check=0).stdout
    assert "llama2-70b" in out and "resnet50" in out
    models = json.loads(run_mapctl("models", "-o", "json", check=0).stdout)
    names = {m["name"] for m in models}
    assert set(PUBLISHED) <= names


def test_ops_lists_registry():
    ops = json.loads(run_mapctl("ops", "-o", "json", check=0).stdout)
    names = {o["name"] for o in ops}
    assert {"linear", "scaled_dot_product_attention", "batch_norm", "split"} <= names


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_inspect_parameter_counts(name):
    info = json.loads(run_mapctl("inspect", name, "-o", "json", check=0).stdout)
    ratio = info["num_parameters"] / PUBLISHED[name]
    assert abs(ratio - 1) < 0.005, f"{name}: {info['num_parameters']} vs {PUBLISHED[name]}"


def test_inspect_zoo_overrides_and_table():
    info = json.loads(run_mapctl("inspect", "gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64", "-o", "json", check=0).stdout)
    assert info["num_parameters"] == 512 * 128 + 64 * 128 + 2 * (12 * 128 * 128 + 13 * 128) + 2 * 128
    table = run_mapctl("inspect", "gpt2", check=0).stdout
    assert "124439808" in table and "OP" in table and "input" in table


def test_import_and_inspect_round_trip(models, tmp_path):
    d, expected = models
    exp = expected["nanogpt_trace_train.pt"]
    spec = "idx:i64[2,16]"
    for ext in (".json", ".pb"):
        out = tmp_path / ("nanogpt" + ext)
        r = run_mapctl("import", str(d / "nanogpt_trace_train.pt"), "--input", spec, "-o", str(out), check=0)
        assert "wrote" in r.stdout and out.exists()
        info = json.loads(run_mapctl("inspect", str(out), "-o", "json", check=0).stdout)
        assert info["num_parameters"] == exp["num_parameters"]
        assert info["outputs"][0]["shape"] == exp["outputs"][0]["shape"]
        assert info["num_tied"] == 1
    # Inspecting the .pt directly gives the same answer.
    direct = json.loads(run_mapctl("inspect", str(d / "nanogpt_trace_train.pt"), "--input", spec, "-o", "json", check=0).stdout)
    assert direct["num_parameters"] == exp["num_parameters"]
    text = run_mapctl("inspect", str(d / "resnet_trace_train.pt"), "--input", "x:f32[2,3,32,32]", "--text", check=0).stdout
    assert "batch_norm_apply(" in text and "update %" in text


def test_error_corrupt_file(tmp_path):
    bad = tmp_path / "corrupt.pt"
    bad.write_bytes(b"PK\x03\x04 garbage")
    r = run_mapctl("inspect", str(bad), "--input", "x:f32[2]")
    assert r.returncode == 1
    assert "cannot load" in r.stderr and "INVALID_ARGUMENT" in r.stderr


def test_error_missing_and_wrong_specs(models):
    d, _ = models
    r = run_mapctl("inspect", str(d / "nanogpt_trace_train.pt"))
    assert r.returncode == 1 and "argument 'idx' has no input spec" in r.stderr
    r = run_mapctl("inspect", str(d / "nanogpt_trace_train.pt"), "--input", "idx:i64[2,16")
    assert r.returncode == 1 and "bad input spec" in r.stderr
    r = run_mapctl("inspect", str(d / "nanogpt_trace_train.pt"), "--input", "idx:f32[2,16]")
    assert r.returncode == 1 and "indices must be an integer tensor, got f32[2,16]" in r.stderr


def test_ops_without_entries_go_by_the_generic_path_and_the_refusal_left_says_why(models):
    d, expected = models
    out = d / "generic.json"
    run_mapctl("import", str(d / "generic_ops.pt"), "--input", "x:f32[4,8]", "-o", str(out), check=0)
    nodes = json.loads(out.read_text())["nodes"]
    schemas = [n["attrs"]["schema"]["s"].split(".")[0] for n in nodes if n["op"] == "aten"]
    assert {op: schemas.count(op) for op in set(schemas)} == expected["generic_ops.pt"]["generic_ops"], schemas
    r = run_mapctl("import", str(d / "refused.pt"), "--input", "x:f32[4,8]", "-o", str(d / "r.json"))
    assert r.returncode == 1
    assert "aten::nonzero" in r.stderr and "depend on the values of its inputs" in r.stderr, r.stderr


def test_error_dangling_value_in_ir_file(models, tmp_path):
    d, _ = models
    good = tmp_path / "g.json"
    run_mapctl("import", str(d / "mlp_script.pt"), "-o", str(good), check=0)
    graph = json.loads(good.read_text())
    graph["nodes"][1]["inputs"][0] = "ghost_value"
    bad = tmp_path / "dangling.json"
    bad.write_text(json.dumps(graph))
    r = run_mapctl("inspect", str(bad))
    assert r.returncode == 1
    assert "ghost_value" in r.stderr and "dangling value" in r.stderr


def test_error_unknown_model_and_override():
    r = run_mapctl("inspect", "gpt5")
    assert r.returncode == 1 and "neither a zoo model" in r.stderr
    r = run_mapctl("inspect", "gpt2:layerz=2")
    assert r.returncode == 1 and "layerz" in r.stderr


def test_devices_answers():
    r = run_mapctl("devices", "-o", "json", check=0)
    info = json.loads(r.stdout)
    assert "built_with_cuda" in info


def test_docs_list_every_op():
    """docs/ops.md and docs/importer.md stay true to the registry (scripts/gen-ops-doc.py)."""
    import os
    from conftest import SOURCE_DIR
    ops_doc = open(os.path.join(SOURCE_DIR, "docs", "ops.md")).read()
    for op in json.loads(run_mapctl("ops", "-o", "json", check=0).stdout):
        assert f"| `{op['name']}` |" in ops_doc, f"docs/ops.md lacks {op['name']}: run scripts/gen-ops-doc.py"
    importer_doc = open(os.path.join(SOURCE_DIR, "docs", "importer.md")).read()
    rows = json.loads(run_mapctl("ops", "--aten", "-o", "json", check=0).stdout)
    for row in rows:
        if row["path"] == "entry":
            assert f"`{row['op']}`" in importer_doc, f"docs/importer.md lacks {row['op']}: run scripts/gen-ops-doc.py"
    # Every other operator LibTorch has goes by the generic path, or is refused with the reason.
    paths = {r["op"]: r for r in rows}
    assert paths["aten::linear"]["path"] == "entry"
    assert paths["aten::cdist"]["path"] == "generic" and paths["aten::logsumexp"]["measured_on"] == "meta"
    assert sum(r["path"] == "generic" for r in rows) > 500, len(rows)
    assert all(r.get("why") for r in rows if r["path"] == "refused")


SMALL_GPT = "gpt2:layers=2,hidden=64,heads=4,vocab=256,seq=32,batch=2"


def test_profile_json_fields_and_timeline(tmp_path):
    svg = tmp_path / "step.svg"
    r = json.loads(run_mapctl("profile", SMALL_GPT, "--timeline", str(svg), "-o", "json", check=0).stdout)
    for key in ("params", "flops_per_step", "predicted_peak_bytes", "peak_breakdown", "predicted_step_seconds",
                "profile_seconds"):
        assert key in r, key
    b = r["peak_breakdown"]
    assert sum(b.values()) == r["predicted_peak_bytes"]
    assert b["optimizer_states"] == 8 * r["params"]  # AdamW: two fp32 moments
    text = svg.read_text()
    assert text.startswith("<svg") and ">backward<" in text
    table = run_mapctl("profile", "gpt2", "--batch-size", "4", "--device-type", "h100-80g", check=0).stdout
    assert "Peak memory:" in table and "h.11" in table


def test_profile_measure_reports_errors():
    r = json.loads(run_mapctl("profile", SMALL_GPT, "--measure", "--steps", "2", "-o", "json", check=0).stdout)
    assert r["measured_peak_bytes"] > 0 and r["measured_step_seconds"] > 0
    assert abs(r["peak_error"]) < 0.05
    assert len(r["measured_steps"]) == 2


def test_profile_errors():
    r = run_mapctl("profile", "gpt2", "--device-type", "tpu-v9")
    assert r.returncode == 1 and "unknown device type 'tpu-v9'" in r.stderr
    r = run_mapctl("profile", "gpt2", "--optimizer", "lion")
    assert r.returncode == 1 and "unknown optimizer 'lion'" in r.stderr
    r = run_mapctl("profile", "gpt2", "--precision", "fp8")
    assert r.returncode == 1 and "unknown precision 'fp8'" in r.stderr


def test_profile_measures_bf16_mixed_precision():
    # bf16 runs the bf16 graph and measures it: its peak as predicted, below fp32's.
    spec = "gpt2:layers=2,hidden=64,heads=4,vocab=256,seq=64,batch=4"
    runs = {p: json.loads(run_mapctl("profile", spec, "--precision", p, "--measure", "--steps", "2", "-o", "json",
                                     check=0).stdout) for p in ("fp32", "bf16")}
    assert runs["bf16"]["precision"] == "bf16" and runs["fp32"]["precision"] == "fp32"
    for r in runs.values():
        assert abs(r["predicted_peak_bytes"] - r["measured_peak_bytes"]) <= 0.05 * r["measured_peak_bytes"], r
    assert runs["bf16"]["measured_peak_bytes"] < 0.85 * runs["fp32"]["measured_peak_bytes"], runs  # masters and fp32 states stay


def test_run_trains_on_text(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(open(os.path.join(SOURCE_DIR, "README.md")).read() * 2)
    r = json.loads(run_mapctl("run", SMALL_GPT, "--data", f"text:{corpus}", "--steps", "30", "--lr", "3e-3",
                              "-o", "json", check=0).stdout)
    assert len(r["steps"]) == 30
    assert r["final_loss_mean"] < r["first_loss"]
    r = run_mapctl("run", SMALL_GPT, "--data", "text")
    assert r.returncode == 1 and "give the file as text:FILE" in r.stderr


def test_learning_rate_schedules():
    """--lr-schedule cosine | linear with --warmup-steps and --min-lr: each step's rate (the JSON's
    `lr`, the log's) is the schedule's — a linear warm-up to --lr, then the decay to --min-lr at
    the last step — and the run trains; constant by default; bad combinations name the flag."""
    flags = ("--steps", "10", "--lr", "0.01", "--warmup-steps", "3", "--min-lr", "0.001", "-o", "json",
             "--data", "text:" + os.path.join(SOURCE_DIR, "README.md"))
    warm = [0.01 * t / 3 for t in (1, 2, 3)]
    decay = {"cosine": lambda p: 0.001 + 0.009 * 0.5 * (1 + math.cos(math.pi * p)), "linear": lambda p: 0.01 - 0.009 * p}
    for kind, shape in decay.items():
        r = json.loads(run_mapctl("run", SMALL_GPT, *flags, "--lr-schedule", kind, check=0).stdout)
        want = warm + [shape((t - 3) / 7) for t in range(4, 11)]
        got = [s["lr"] for s in r["steps"]]
        assert all(abs(a - b) <= 1e-12 for a, b in zip(got, want)) and len(got) == 10, (kind, got, want)
        assert r["steps"][-1]["loss"] < r["steps"][0]["loss"], r["steps"]
    r = json.loads(run_mapctl("run", SMALL_GPT, "--steps", "3", "-o", "json", check=0).stdout)
    assert [s["lr"] for s in r["steps"]] == [1e-3] * 3
    r = run_mapctl("run", SMALL_GPT, "--steps", "2", "--lr", "0.01", check=0)
    assert "lr 0.01 " in r.stdout, r.stdout
    for bad, says in ((("--lr-schedule", "step"), "--lr-schedule"),
                      (("--lr-schedule", "cosine", "--warmup-steps", "10"), "fewer --warmup-steps"),
                      (("--min-lr", "0.0001",), "--lr-schedule cosine or linear"),
                      (("--lr-schedule", "linear", "--min-lr", "1"), "--min-lr")):
        r = run_mapctl("run", SMALL_GPT, "--steps", "10", *bad)
        assert r.returncode != 0 and says in r.stderr, (bad, r.stderr)


def test_calibrate_writes_a_usable_profile(tmp_path):
    out = tmp_path / "local.json"
    r = run_mapctl("calibrate", "--quick", "--collectives", "2", "-o", str(out), check=0)
    prof = json.loads(out.read_text())
    assert prof["fp32_flops"] > 0 and prof["memory_bandwidth"] > 0 and prof["source"] == "measured"
    # Elementwise arithmetic (GELU, layer norm, softmax) runs far below the matrix products.
    assert 0 < prof["vector_flops"] < prof["fp32_flops"], prof
    # Each of them, and the loss, at a rate of its own (the loss's backward is the slowest here).
    assert set(prof["op_rates"]) == {"gelu", "gelu:tanh", "layer_norm", "softmax", "log_softmax", "cross_entropy"}, prof
    assert all(0 < rate < prof["fp32_flops"] for rate in prof["op_rates"].values()), prof
    # Two forked rank processes: their all-reduce (idle, and between steps of compute), and how
    # fast each computes beside the other.
    [two] = prof["host_collectives"]
    assert two["ranks"] == 2 and two["alpha"] > 0 and 0 < two["compute_speed"] <= 2, two
    assert two["busy_alpha"] >= two["alpha"], two  # among computing ranks: the latency and the waits
    assert "2 local ranks: all-reduce" in r.stdout and "each computes at" in r.stdout, r.stdout
    r = json.loads(run_mapctl("profile", SMALL_GPT, "--device-type", str(out), "-o", "json", check=0).stdout)
    assert r["device"] == "local-cpu"
    # --quick measures once; --rounds repeats every measurement and keeps each figure's median.
    assert "median" not in prof["description"], prof["description"]
    rounds = tmp_path / "rounds.json"
    run_mapctl("calibrate", "--quick", "--rounds", "2", "-o", str(rounds), check=0)
    assert "each figure the median of 2 rounds" in json.loads(rounds.read_text())["description"]
    r = run_mapctl("calibrate", "--rounds", "0", check=None)
    assert r.returncode != 0 and "--rounds" in r.stderr, r.stderr

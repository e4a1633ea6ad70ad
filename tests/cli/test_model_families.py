"""Model families nobody wrote a registry entry for (tests/import/models/families.py): the generic
ATen path imports, profiles and trains them; with every hand-written entry disabled the floor
holds by itself; integer inputs take stated ranges. The whole suite (30 families) is the long
form's: scripts/model-suite.py --check 14."""
import json
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, MAPCTL, run_mapctl

SUITE = os.path.join(SOURCE_DIR, "scripts", "model-suite.py")


def _suite(*args, timeout=900):
    r = subprocess.run(["/usr/bin/python3", SUITE, "--mapctl", MAPCTL, *args], capture_output=True, text=True,
                       timeout=timeout)
    results = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    return r, results


def _assert_passed(res, peak_tolerance):
    assert "import_error" not in res, res
    assert abs(res["peak_error"]) <= peak_tolerance, res
    assert res["ranks_blocks"] > 0 and res["ranks_loss_diff"] < 1e-4 and res["ranks_param_diff"] < 1e-4, res


def test_generic_ops_import_profile_and_train_on_four_ranks():
    """cdist (SchNet), exponential_ drawn in forward (the Gumbel-softmax VAE), two-index aten::index
    (CLIP's end-of-text features): each model's generic nodes counted, its peak within 5% of a
    measured step, 4 ranks equal to one process. DLRM — embedding_bag after ids hashed by %, their
    range stated — imports and trains on 4 ranks equal to one process."""
    r, results = _suite("--models", "schnet,gumbel_vae,clip", "--check", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    by = {x["model"]: x for x in results}
    assert "aten::cdist" in by["schnet"]["generic_schemas"]
    assert "aten::exponential" in by["gumbel_vae"]["generic_schemas"]
    assert "aten::index.Tensor" in by["clip"]["generic_schemas"]
    for x in results:
        _assert_passed(x, 0.05)
    r, results = _suite("--models", "dlrm", "--stages", "import,ranks")
    (dlrm,) = results
    assert {"aten::embedding_bag.padding_idx", "aten::remainder.Scalar"} <= set(dlrm["generic_schemas"]), dlrm
    assert dlrm["ranks_blocks"] > 0 and dlrm["ranks_loss_diff"] < 1e-4 and dlrm["ranks_param_diff"] < 1e-4, dlrm


def test_a_replicated_generic_op_leaves_the_rest_of_the_model_data_parallel(models):
    """DLRM's embedding_bag (its offsets make it no per-sample op: it runs on whole batches) does
    not stop data parallelism around it: 4 ranks equal one process, each rank's peak within 5%."""
    out, _ = models
    r = run_mapctl("run", str(out / "dlrm_trace_train.pt"), "--input", "dense_x:f32[8,4]", "--input",
                   "sparse_ids:i64[8,3,4]:0..999999", "--loss", "mse", "--ranks", "4", "--strategy", "dp", "--steps", "3",
                   "--optimizer", "momentum", "--lr", "0.01", "--check-reference", "-o", "json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["plan"].startswith("data parallel"), j["plan"]
    assert j["reference_max_relative_loss_difference"] < 1e-4 and j["reference_max_parameter_difference"] < 1e-4, j
    for p in j["per_rank"]:
        assert abs(p["predicted_peak_bytes"] - p["measured_peak_bytes"]) <= 0.05 * p["measured_peak_bytes"], p


def test_the_floor_holds_by_itself():
    """Every hand-written entry disabled: a transformer (Whisper's encoder) and a CNN (ESPCN)
    import by the generic path alone, profile within 10% and train on 4 ranks equal to one
    process."""
    r, results = _suite("--generic-only", "--models", "whisper_encoder,espcn", "--peak-tolerance", "0.10", "--check", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    for x in results:
        assert x["generic_nodes"] >= 0.9 * x["nodes"], x  # the rest: the loss MAP appends, constants
        _assert_passed(x, 0.10)


def test_a_micro_batched_sharded_plan_of_generic_ops_is_profiled_within_five_percent(models):
    """A per-sample generic op (SchNet's cdist, SincNet's std) split on the batch over 4 ranks and
    run in 2 micro-batches: its sizes derived from the rule the import proved, each rank's
    measured peak within 5% of its program's prediction, one process's result."""
    out, _ = models
    cases = [("schnet_trace_train.pt", ["--input", "z:i64[8,12]:0..9", "--input", "pos:f32[8,12,3]", "--loss", "mse"]),
             ("sincnet_trace_train.pt", ["--input", "x:f32[8,128]", "--loss", "cross_entropy"])]
    for name, flags in cases:
        r = run_mapctl("run", str(out / name), *flags, "--ranks", "4", "--strategy", "dp", "--micro-batches", "2",
                       "--steps", "3", "--optimizer", "momentum", "--lr", "0.01", "--check-reference", "-o", "json")
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["micro_batches"] == 2, j
        assert j["reference_max_relative_loss_difference"] < 1e-4 and j["reference_max_parameter_difference"] < 1e-4, j
        for p in j["per_rank"]:
            m, pred = p["measured_peak_bytes"], p["predicted_peak_bytes"]
            assert abs(pred - m) <= 0.05 * m, (name, p)


def test_an_integer_input_takes_a_stated_range(models):
    """DiT's timestep indexes nothing: without a range MAP says how to state one; with one it trains,
    and a range wider than an embedding it reaches is refused naming the node."""
    out, _ = models
    dit = str(out / "dit_trace_train.pt")
    base = ["--input", "x:f32[8,4,8,8]", "--input", "y:i64[8]", "--loss", "mse", "--steps", "2"]
    r = run_mapctl("run", dit, *base, "--input", "t:i64[8]")
    assert r.returncode == 1 and "state its range as --input t:DTYPE[SHAPE]:LOW..HIGH" in r.stderr, r.stderr
    r = run_mapctl("run", dit, *base, "--input", "t:i64[8]:0..999", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["steps"]) == 2
    schnet = ["--input", "pos:f32[8,12,3]", "--loss", "mse", "--steps", "1"]
    r = run_mapctl("run", str(out / "schnet_trace_train.pt"), *schnet, "--input", "z:i64[8,12]:0..99")
    assert r.returncode == 1 and "ranges 0..99, so node" in r.stderr and "where it takes 0..9" in r.stderr, r.stderr


@pytest.mark.long  # ~3 min: the long form runs it (scripts/test.sh --long)
def test_the_real_model_families():
    """At least 14 of the 30 families import, profile within 5% of the measured peak and train on
    4 ranks equal to one process (docs/importer.md's table is this script's output)."""
    r, results = _suite("--check", "14", timeout=1800)
    assert r.returncode == 0, r.stdout
    assert len(results) >= 15 and len({x["domain"] for x in results}) >= 7

"""scripts/gpu_check: the GPU check's steps on the CPU, on its small cases — predictions made by
mapctl plan, PyTorch's step measured against them (part a), and `mapctl run` trained from
PyTorch's weights and batch to PyTorch's losses (part b's comparison). The kit's build is the
rehearsal's (scripts/gpu-check.sh --device cpu), too slow for this suite."""
import json
import os
import subprocess

from conftest import MAPCTL, SOURCE_DIR

CHECK = os.path.join(SOURCE_DIR, "scripts", "gpu_check", "check.py")
ONLY = "^gpt-small (fp32|bf16 recompute|bf16 mb4)$"


def _check(*args):
    r = subprocess.run(["/usr/bin/python3", CHECK, *args], capture_output=True, text=True, timeout=300)
    return r


def test_predictions_then_pytorchs_step_then_maps_run_on_the_same_weights(tmp_path):
    pred = tmp_path / "pred.json"
    r = _check("predict", "--mapctl", MAPCTL, "--cases", "cpu", "--device-type", "cpu", "--only", ONLY, "-o", str(pred))
    assert r.returncode == 0, r.stderr
    made = json.load(open(pred))
    by_case = made["device_types"]["cpu"]
    assert sorted(by_case) == ["gpt-small bf16 mb4", "gpt-small bf16 recompute", "gpt-small fp32"]
    assert all(p["predicted_peak_bytes"] > 0 and p["predicted_step_seconds"] > 0 for p in by_case.values())
    # The recomputed case names the layers PyTorch's step will checkpoint; the pinned micro-batches hold.
    assert by_case["gpt-small bf16 recompute"]["recomputed_layers"] == ["transformer.h.0", "transformer.h.1"]
    assert by_case["gpt-small bf16 mb4"]["micro_batches"] == 4 and by_case["gpt-small fp32"]["recomputed_layers"] == []

    out = tmp_path / "out"
    r = _check("profile", "--predictions", str(pred), "--device", "cpu", "--device-type", "cpu", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.load(open(out / "profile.json"))
    assert [row["case"] for row in rows] == [c["name"] for c in made["cases"]]
    assert all(row["pytorch"]["step_seconds"] > 0 for row in rows), rows
    assert "| gpt-small bf16 recompute |" in (out / "profile.md").read_text()

    r = _check("run", "--mapctl", MAPCTL, "--predictions", str(pred), "--device", "cpu", "--device-type", "cpu",
               "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    ran = json.load(open(out / "run.json"))
    assert [row["case"] for row in ran] == ["gpt-small fp32"]  # the others need the rank runtime
    assert ran[0]["worst_relative"] <= 1e-3 and len(ran[0]["map_losses"]) == 4, ran
    assert ran[0]["map_losses"][0] != ran[0]["map_losses"][-1]  # it trained
    table = (out / "run.md").read_text()
    assert "gpt-small bf16 mb4 | not run: micro-batches and recomputation run on the rank runtime" in table


def test_the_rehearsal_covers_up_existing_paths_of_the_kits_packages():
    r = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE_DIR, "scripts", "gpu_check", "kit.py"), "hide"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    paths = r.stdout.split()
    assert "/usr/include/absl" in paths and "/usr/bin/protoc" in paths and "/usr/include/google" in paths
    assert all(os.path.exists(p) for p in paths)
    assert not any(p.startswith("/usr/include/torch") or p == "/usr/include" for p in paths)

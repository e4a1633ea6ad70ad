"""mapctl run --resume under another plan (issue 22): a checkpoint written by 4 ranks under a 2x2
mesh with ZeRO-2 is resharded into 1, 2 and 4 ranks under data-parallel, tensor-parallel and
ZeRO-3 plans — each rank takes its blocks and shards of the whole tensors, optimizer state
included — and training goes on with the losses of an uninterrupted 4-rank run."""
import json
import shutil

from conftest import run_mapctl

GPT = "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"
# AdamW under a cosine schedule: the moments and the step count must come back for the losses to.
ADAM = ("--steps", "8", "--optimizer", "adamw", "--lr", "0.01", "--lr-schedule", "cosine", "--warmup-steps", "2", "--min-lr", "0.001")
FOUR = ("--ranks", "4", "--mesh", "2x2", "--zero", "2")


def _json_run(*args, **kwargs):
    r = run_mapctl("run", *args, "-o", "json", **kwargs)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_a_four_rank_checkpoint_goes_on_under_one_two_and_four_rank_plans(tmp_path):
    full, _ = _json_run(GPT, *ADAM, *FOUR)
    ckpt = tmp_path / "ckpt"
    crashed = run_mapctl("run", GPT, *ADAM, *FOUR, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "4",
                         env_extra={"MAPD_FAULT": "crash:3:6"})
    assert crashed.returncode == 1 and (ckpt / "LATEST").read_text() == "4", crashed.stderr
    for plan in (("--ranks", "1"), ("--ranks", "2", "--strategy", "dp"), ("--ranks", "2", "--strategy", "tp"),
                 ("--ranks", "4", "--zero", "3"), ("--ranks", "4", "--strategy", "tp")):
        copy = tmp_path / ("ckpt" + "_".join(plan))
        shutil.copytree(ckpt, copy)
        resumed, said = _json_run(GPT, *ADAM, *plan, "--resume", str(copy))
        assert "step 4 was written by 4 rank(s)" in said and "takes its blocks of the whole tensors" in said, said
        assert resumed["ranks"] == int(plan[1]), (plan, resumed["ranks"])
        if "--zero" in plan:
            assert resumed["zero_stage"] == 3, resumed
        assert [s["step"] for s in resumed["steps"]] == [5, 6, 7, 8], plan
        for a, b in zip(full["steps"][4:], resumed["steps"]):
            assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (plan, a, b)
            assert a["lr"] == b["lr"], (plan, a, b)
        # The resumed run's own checkpoint is of its plan, and resumes as such (no resharding).
        assert (copy / "LATEST").read_text() == "8"


def test_a_checkpoint_of_another_model_is_refused_naming_the_tensor(tmp_path):
    ckpt = tmp_path / "ckpt"
    _json_run(GPT, "--steps", "2", "--ranks", "2", "--checkpoint-dir", str(ckpt))
    other = GPT.replace("hidden=32", "hidden=48")
    r = run_mapctl("run", other, "--steps", "4", "--ranks", "4", "--resume", str(ckpt))  # resharded
    assert r.returncode == 1 and "[FAILED_PRECONDITION]" in r.stderr and "(another model?)" in r.stderr, r.stderr
    assert "the checkpoint's 'wte.weight' is f32[64,32]; the model's is [64, 48]" in r.stderr, r.stderr
    r = run_mapctl("run", other, "--steps", "4", "--ranks", "2", "--resume", str(ckpt))  # the same plan in words
    assert r.returncode == 1 and "checkpoint block of 'wte.weight' is f32[64,32]; this rank holds f32[64,48] (another model or plan?)" in r.stderr, \
        r.stderr

"""Elastic jobs through a real mapd and two mapd-workers (docs/coordinator.md "Elastic jobs"): a
job of 4 ranks loses a worker, goes on with the 2 ranks left (re-planned under the same budget,
so in more micro-batches; its checkpoint resharded), and grows back to 4 at a checkpoint once
the worker is back — with the losses of the steps it ran twice the same."""
import datetime
import json
import time

import pytest

from test_jobs import TOKEN, mapctl, start_mapd, start_worker, stop_all, wait_past_a_checkpoint

# Its global batch of 16 fits 4 MiB a device on 4 ranks in one pass (3.9 MiB measured, ~8 ms a
# step), and on 2 only in several (4 micro-batches: 3.4 MiB, ~16 ms): recomputation is off, so
# micro-batches are what make up for the devices lost.
GPT = "gpt2:layers=2,hidden=64,heads=2,vocab=256,seq=64,batch=16"
BUDGET = ("--memory-per-device", "4MiB", "--recompute", "off")
# Enough steps that the job still runs after the test has seen it shrink and restarted the
# worker; at most mapd keeps a progress event of every step for (kMaxProgressEvents).
STEPS = 1000
EVERY = 20


def event_seconds(event):
    return datetime.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def wait_for_message(env, job, text, timeout=90):
    """The first event of `job` whose message has `text`, and every event so far."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        events = json.loads(mapctl(env, "logs", str(job), "-o", "json", check=0).stdout)
        found = [e for e in events if text in e["message"]]
        if found:
            return found[0], events
        assert events[-1]["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"), [e["message"] for e in events[-8:]]
        time.sleep(0.2)
    raise AssertionError(f"no event of job {job} says '{text}' in {timeout} s: {[e['message'] for e in events[-8:]]}")


# Checkpoints on storage mapd and its workers share, or (issue 50) on the workers' own disks, each
# worker's shards kept by a peer worker too: the lost worker's come from its peer.
@pytest.mark.parametrize("storage", ["shared", "peers"])
def test_an_elastic_job_goes_on_with_the_devices_left_and_grows_back_when_a_worker_returns(tmp_path, storage):
    ckpt = tmp_path / "checkpoints"
    shared = ("--checkpoint-dir", str(ckpt)) if storage == "shared" else ()
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "1.5", "--heartbeat-seconds", "0.25", *shared, "--elastic-grace-seconds", "2")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta")]
        mapctl(env, "submit", GPT, "--ranks", "4", "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--elastic", "2:4", *BUDGET,
               check=0)
        committed, kill_step, _ = wait_past_a_checkpoint(env, 1)
        workers[1][0].kill()  # beta: ranks 2-3; no replacement
        workers[1][0].wait()
        lost, _ = wait_for_message(env, 1, "worker w-2 was lost")
        resumed, events = wait_for_message(env, 1, "resumed on 2 of 4 devices")
        shrink_seconds = event_seconds(resumed) - event_seconds(lost)
        assert shrink_seconds <= 30, (lost, resumed)
        assert "(4 before): plan mesh 2, " in resumed["message"] and resumed["message"].endswith("; on w-1 (rank 0-1)"), resumed["message"]
        assert "micro-batches" in resumed["message"], resumed["message"]  # the global batch in more passes
        got = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)
        assert got["devices"] == 2 and got["restarts"] == 1, got
        described = mapctl(env, "describe", "1", check=0).stdout
        assert "Devices:    2 now (elastic: 2 to 4)" in described, described
        # The worker comes back (registered anew): the job grows to 4 at its next checkpoint.
        workers[1] = start_worker(env, tmp_path, "beta")
        back = time.time()
        growing, _ = wait_for_message(env, 1, "growing from 2 to 4 devices at the checkpoint of step")
        grown, _ = wait_for_message(env, 1, "resumed on 4 of 4 devices")
        grow_seconds = time.time() - back
        assert "(2 before)" in grown["message"] and "w-3" in grown["message"], grown["message"]
        r = mapctl(env, "watch", "1", check=None)
        assert r.returncode == 0, r.stdout + r.stderr
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
        messages = [e["message"] for e in events]
        assert events[-1]["state"] == "SUCCEEDED" and f"trained {STEPS} steps on 4 rank(s)" in messages[-1], messages[-1]
        got = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)
        assert got["devices"] == 4 and got["restarts"] == 1 and got["attempt"] == 2, got
        # Every step kept ran, and a step run again (after each resume) has the loss it had.
        losses = {}
        for e in events:
            if int(e.get("step", 0)) > 0:
                losses.setdefault(int(e["step"]), []).append(e["loss"])
        assert sorted(losses) == list(range(1, STEPS + 1)), sorted(losses)[:10]
        repeated = {s: l for s, l in losses.items() if len(l) > 1}
        assert repeated, "no step ran twice: the test did not interrupt the job between its checkpoints"
        for step, seen in repeated.items():
            assert max(seen) - min(seen) <= 1e-5 * abs(seen[0]), (step, seen)
        worst = max((max(l) - min(l)) / abs(l[0]) for l in repeated.values())
        print(f"\nelastic ({storage}): lost at step ~{kill_step}, {resumed['message']!r} {shrink_seconds} s after the loss was noticed; "
              f"grown back to 4 {grow_seconds:.1f} s after the worker returned ({growing['message']}); "
              f"{len(repeated)} repeated steps, worst relative loss difference {worst:.1e}")
    finally:
        stop_all(proc, workers)

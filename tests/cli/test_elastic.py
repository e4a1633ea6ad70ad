"""Elastic jobs through a real mapd and two mapd-workers (docs/coordinator.md "Elastic jobs"): a
job of 4 ranks loses a worker, goes on with the 2 ranks left (re-planned, its checkpoint
resharded), and grows back to 4 at a checkpoint once a worker returns — with the losses of the
steps it ran twice the same."""
import calendar
import json
import time

from test_jobs import TOKEN, mapctl, start_mapd, start_worker, stop_all, wait_past_a_checkpoint

GPT = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
# Enough steps that the job still runs after the test has seen it shrink and started a worker
# (a step takes a few ms on this model); mapd keeps every 2nd step's event (kMaxProgressEvents).
STEPS = 2000
EVERY = 20


def event_seconds(event):
    return calendar.timegm(time.strptime(event["time"], "%Y-%m-%dT%H:%M:%SZ"))


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


def test_an_elastic_job_goes_on_with_the_devices_left_and_grows_back_when_a_worker_returns(tmp_path):
    ckpt = tmp_path / "checkpoints"
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "1.5", "--heartbeat-seconds", "0.25", "--checkpoint-dir", str(ckpt),
                            "--elastic-grace-seconds", "2")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta")]
        mapctl(env, "submit", GPT, "--ranks", "4", "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--elastic", "2:4", check=0)
        committed, kill_step, _ = wait_past_a_checkpoint(env, 1)
        workers[1][0].kill()  # beta: ranks 2-3; no replacement
        workers[1][0].wait()
        lost, _ = wait_for_message(env, 1, "worker w-2 was lost")
        resumed, events = wait_for_message(env, 1, "resumed on 2 of 4 devices")
        shrink_seconds = event_seconds(resumed) - event_seconds(lost)
        assert shrink_seconds <= 30, (lost, resumed)
        assert "(4 before): plan " in resumed["message"] and resumed["message"].endswith("; on w-1 (rank 0-1)"), resumed["message"]
        got = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)
        assert got["devices"] == 2 and got["restarts"] == 1, got
        described = mapctl(env, "describe", "1", check=0).stdout
        assert "Devices:    2 now (elastic: 2 to 4)" in described, described
        # A worker comes back: the job grows to 4 at its next checkpoint.
        workers.append(start_worker(env, tmp_path, "gamma"))
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
        stride = (STEPS + 999) // 1000
        assert sorted(losses) == sorted({1, STEPS} | set(range(stride, STEPS + 1, stride))), sorted(losses)[:10]
        repeated = {s: l for s, l in losses.items() if len(l) > 1}
        assert repeated, "no step ran twice: the test did not interrupt the job between its checkpoints"
        for step, seen in repeated.items():
            assert max(seen) - min(seen) <= 1e-5 * abs(seen[0]), (step, seen)
        print(f"\nelastic: lost at step ~{kill_step}, resumed on 2 devices {shrink_seconds} s after the loss was noticed; "
              f"grown back to 4 {grow_seconds:.1f} s after the worker returned ({growing['message']}); "
              f"{len(repeated)} repeated steps, losses equal within 1e-5")
    finally:
        stop_all(proc, workers)

"""mapctl's job commands against a real mapd on loopback (port 0, a temp SQLite store)."""
import json
import os
import signal
import subprocess

import pytest

from conftest import run_mapctl

MAPD = os.environ.get("MAPD", "")
MAPD_WORKER = os.environ.get("MAPD_WORKER", "")
TOKEN = "cli-test-token"
GPT = "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"


def start_mapd(store, *flags):
    assert MAPD and os.path.exists(MAPD), "set MAPD to the mapd binary (ctest does)"
    proc = subprocess.Popen([MAPD, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--store", str(store), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, MAPD_TOKEN=TOKEN))
    line = proc.stdout.readline()
    assert "serving on port" in line, line + proc.stderr.read()
    return proc, int(line.split("serving on port ")[1].split()[0])


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


@pytest.fixture()
def coordinator(tmp_path):
    proc, port = start_mapd(tmp_path / "jobs.db")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    yield tmp_path, env
    if proc.poll() is None:
        stop(proc)


def mapctl(env, *args, check=None):
    return run_mapctl(*args, check=check, env_extra=env)


def test_submit_list_get_cancel_watch_logs(coordinator):
    tmp, env = coordinator
    r = mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "20", check=0)
    assert "submitted job 1" in r.stdout and "PENDING" in r.stdout
    job_file = tmp / "job.yaml"
    job_file.write_text("model: mlp:in=16,hidden=32,layers=2,out=8,batch=8\nsteps: 5\nranks: 4\nmesh: 2x2\nname: tiny-mlp\n")
    submitted = json.loads(mapctl(env, "submit", "-f", str(job_file), "-o", "json", check=0).stdout)
    assert submitted["spec"]["name"] == "tiny-mlp" and submitted["spec"]["mesh"] == ["2", "2"]
    listed = json.loads(mapctl(env, "jobs", "-o", "json", check=0).stdout)
    assert [j["state"] for j in listed] == ["PENDING", "PENDING"]
    assert "tiny-mlp" in mapctl(env, "jobs", check=0).stdout
    assert "Training:   20 steps on 2 rank(s)" in mapctl(env, "get", "1", check=0).stdout
    assert "CANCELLED" in mapctl(env, "cancel", "2", check=0).stdout
    # watch follows the outcome: cancelled -> exit 3; logs print the history.
    w = mapctl(env, "watch", "2")
    assert w.returncode == 3 and "cancelled by the user" in w.stdout, w.stdout + w.stderr
    logs = mapctl(env, "logs", "2", check=0).stdout
    assert "#1" in logs and "submitted" in logs and "#2" in logs
    # A finished job cannot be cancelled; an unknown one is not found.
    r = mapctl(env, "cancel", "2")
    assert r.returncode == 1 and "[FAILED_PRECONDITION]" in r.stderr
    r = mapctl(env, "get", "99")
    assert r.returncode == 1 and "[NOT_FOUND]" in r.stderr


def test_errors_name_what_to_do(coordinator):
    tmp, env = coordinator
    r = mapctl(dict(env, MAPD_TOKEN="wrong"), "jobs")
    assert r.returncode == 1 and "[UNAUTHENTICATED]" in r.stderr
    r = mapctl(env, "submit", "gpt2:layerz=2", "--ranks", "2")
    assert r.returncode == 1 and "unknown option 'layerz'" in r.stderr
    r = mapctl(env, "submit", GPT, "--ranks", "3", "--mesh", "2x2")
    assert r.returncode == 1 and "[INVALID_ARGUMENT]" in r.stderr and "make them agree" in r.stderr
    assert json.loads(mapctl(env, "workers", "-o", "json", check=0).stdout) == []  # none registered
    r = mapctl(env, "submit", GPT, "--ranks", "2", "--memory-per-device", "1KiB")
    assert r.returncode == 1 and "[FAILED_PRECONDITION]" in r.stderr and "no plan fits" in r.stderr, r.stderr
    assert json.loads(mapctl(env, "jobs", "-o", "json", check=0).stdout) == []  # nothing queued
    (tmp / "bad.yaml").write_text("model: gpt2\nstepz: 3\n")
    r = mapctl(env, "submit", "-f", str(tmp / "bad.yaml"))
    assert r.returncode == 1 and "unknown field 'stepz'" in r.stderr
    r = mapctl({"MAPD_ADDRESS": "127.0.0.1:1", "MAPD_TOKEN": TOKEN}, "jobs")
    assert r.returncode == 1 and "is mapd running there?" in r.stderr


def test_a_restarted_coordinator_lists_every_job(tmp_path):
    proc, port = start_mapd(tmp_path / "jobs.db")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    mapctl(env, "submit", GPT, "--ranks", "2", check=0)
    mapctl(env, "submit", GPT, "--ranks", "2", check=0)
    mapctl(env, "cancel", "1", check=0)
    stop(proc)
    proc, port = start_mapd(tmp_path / "jobs.db")
    env["MAPD_ADDRESS"] = f"127.0.0.1:{port}"
    try:
        listed = json.loads(mapctl(env, "jobs", "-o", "json", check=0).stdout)
        assert [(j["id"], j["state"]) for j in listed] == [("1", "CANCELLED"), ("2", "PENDING")]
        assert "cancelled by the user" in mapctl(env, "logs", "1", check=0).stdout
    finally:
        stop(proc)


def test_workers_register_keep_their_lease_and_are_lost_when_they_stop(tmp_path):
    import time
    import urllib.request
    assert MAPD_WORKER and os.path.exists(MAPD_WORKER), "set MAPD_WORKER to the mapd-worker binary (ctest does)"
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "1", "--heartbeat-seconds", "0.2")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        for name in ("alpha", "beta"):
            w = subprocess.Popen([MAPD_WORKER, "--cpu-devices", "2", "--memory-per-device", str(1 << 30), "--hostname", name,
                                  "--metrics-listen", "127.0.0.1:0"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env))
            metrics_line = w.stdout.readline()
            assert "metrics on http://" in metrics_line, metrics_line + w.stderr.read()
            registered = w.stdout.readline()
            assert "registered as w-" in registered, registered + w.stderr.read()
            workers.append((w, metrics_line.split("metrics on ")[1].strip()))
        time.sleep(1.5)  # several heartbeats: both stay ALIVE past the 1 s lease
        listed = json.loads(mapctl(env, "workers", "-o", "json", check=0).stdout)
        assert [(x["hostname"], x["state"], len(x["devices"])) for x in listed] == [("alpha", "ALIVE", 2), ("beta", "ALIVE", 2)]
        table = mapctl(env, "workers", check=0).stdout
        assert "cpu:0 (1.0 GiB)" in table and "ALIVE" in table
        # The worker's own /metrics passes promtool.
        text = urllib.request.urlopen(workers[0][1], timeout=10).read().decode()
        assert "mapd_worker_up 1" in text and 'mapd_worker_heartbeats_total{outcome="ok"}' in text, text
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        # A killed worker's lease runs out: LOST. A stopped one exits 0.
        workers[1][0].kill()
        workers[1][0].wait()
        time.sleep(2)
        listed = json.loads(mapctl(env, "workers", "-o", "json", check=0).stdout)
        assert [x["state"] for x in listed] == ["ALIVE", "LOST"], listed
        workers[0][0].send_signal(signal.SIGTERM)
        assert workers[0][0].wait(timeout=20) == 0
    finally:
        for w, _ in workers:
            if w.poll() is None:
                w.kill()
        stop(proc)

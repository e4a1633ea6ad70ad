"""mapctl's job commands against a real mapd on loopback (port 0, a temp SQLite store)."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import run_mapctl

MAPD = os.environ.get("MAPD", "")
MAPD_WORKER = os.environ.get("MAPD_WORKER", "")
TOKEN = "cli-test-token"
WORKER_TOKEN = "cli-test-worker-token"  # workers have a credential of their own
GPT = "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"


def start_mapd(store, *flags, listen="127.0.0.1:0"):
    assert MAPD and os.path.exists(MAPD), "set MAPD to the mapd binary (ctest does)"
    # mapd's log (a line per job event) to a file beside the store: a pipe no one reads would fill
    # and stall it.
    log = open(os.path.join(os.path.dirname(str(store)), "mapd.log"), "a")
    proc = subprocess.Popen([MAPD, "--listen", listen, "--metrics-listen", "127.0.0.1:0", "--store", str(store), *flags],
                            stdout=subprocess.PIPE, stderr=log, text=True,
                            env=dict(os.environ, MAPD_TOKEN=TOKEN, MAPD_WORKER_TOKEN=WORKER_TOKEN))
    line = proc.stdout.readline()
    assert "serving on port" in line, line + open(log.name).read()
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


def test_a_torchscript_model_is_submitted_with_its_weights_and_no_file_path(coordinator, models):
    """The coordinator takes no file paths (issue 18): `mapctl submit model.pt` sends the model's
    weights inside the graph, and the job is admitted."""
    tmp, env = coordinator
    d, _ = models
    r = mapctl(env, "submit", str(d / "nanogpt_trace_train.pt"), "--input", "idx:i64[2,16]", "--ranks", "1", "--steps", "2",
               "-o", "json", check=0)
    job = json.loads(r.stdout)
    assert job["state"] == "PENDING", job
    text = json.dumps(job)
    assert str(d) not in text and "nanogpt_trace_train.pt" not in text.replace(job["spec"].get("name", ""), ""), text[:2000]


def test_a_job_starts_from_weights_sent_in_its_graph(coordinator):
    """submit --init-from: mapctl reads the state dict and sends the weights in the job's graph
    (a zoo model too, which is otherwise sent as its spec); a state dict that does not fit is
    refused before anything is sent."""
    import torch
    tmp, env = coordinator
    mlp = "mlp:in=4,hidden=8,layers=1,out=3,batch=2"
    params = json.loads(run_mapctl("inspect", mlp, "-o", "json", check=0).stdout)["parameters"]
    torch.save({p["name"]: torch.full(p["shape"], 0.25) for p in params}, tmp / "weights.pt")
    submitted = json.loads(mapctl(env, "submit", mlp, "--init-from", str(tmp / "weights.pt"), "-o", "json", check=0).stdout)
    job = json.loads(mapctl(env, "get", str(submitted["id"]), "-o", "json", check=0).stdout)
    assert "model" not in job["spec"], job["spec"]
    sent = {p["name"]: p for p in job["spec"]["graph"]["parameters"]}
    assert set(sent) == {p["name"] for p in params}, sent
    import base64
    import struct
    for p in sent.values():  # every value is the file's 0.25, as f32 bytes
        raw = base64.b64decode(p["data"]["inline_data"])
        assert set(struct.unpack(f"<{len(raw) // 4}f", raw)) == {0.25}, p["name"]
    assert str(tmp) not in json.dumps(job)
    torch.save({"net.0.weight": torch.zeros(8, 5)}, tmp / "bad.pt")
    r = mapctl(env, "submit", mlp, "--init-from", str(tmp / "bad.pt"))
    assert r.returncode == 1 and "'net.0.weight' is f32[8,5], the model's f32[8,4]" in r.stderr, r.stderr


def test_submit_list_get_cancel_watch_logs(coordinator):
    tmp, env = coordinator
    r = mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "20", check=0)
    assert "submitted job 1" in r.stdout and "PENDING" in r.stdout
    job_file = tmp / "job.yaml"
    job_file.write_text("model: mlp:in=16,hidden=32,layers=2,out=8,batch=8\nsteps: 5\nranks: 4\nmesh: 2x2\nname: tiny-mlp\n")
    submitted = json.loads(mapctl(env, "submit", "-f", str(job_file), "-o", "json", check=0).stdout)
    assert submitted["spec"]["name"] == "tiny-mlp" and submitted["spec"]["mesh"] == [2, 2]  # JSON numbers
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
    assert r.returncode == 1 and "stepz: unknown field; did you mean 'steps'?" in r.stderr, r.stderr
    # A learning-rate schedule the coordinator cannot run is refused at submission, saying why.
    (tmp / "schedule.yaml").write_text("model: gpt2:layers=1\nsteps: 3\nlr_schedule: step\n")
    r = mapctl(env, "submit", "-f", str(tmp / "schedule.yaml"))
    assert r.returncode == 1 and "lr_schedule 'step' is not one of constant, cosine, linear" in r.stderr, r.stderr
    r = mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "5", "--lr-schedule", "cosine", "--warmup-steps", "5")
    assert r.returncode == 1 and "[INVALID_ARGUMENT]" in r.stderr and "fewer --warmup-steps" in r.stderr, r.stderr
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
        assert [(j["id"], j["state"]) for j in listed] == [(1, "CANCELLED"), (2, "PENDING")]
        assert "cancelled by the user" in mapctl(env, "logs", "1", check=0).stdout
    finally:
        stop(proc)


def test_ports_and_stores_are_owned_not_shared(tmp_path):
    """Issue 50: a second mapd on the first's port, or on its store, and a worker on a taken metrics
    port exit 1 naming what is taken (gRPC and httplib set SO_REUSEPORT by default: both used to
    start, and the kernel split the clients between them); the first keeps answering."""
    proc, port = start_mapd(tmp_path / "jobs.db")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    try:
        def second(*args, **extra):
            return subprocess.run(list(args), capture_output=True, text=True, timeout=60,
                                  env=dict(os.environ, MAPD_TOKEN=TOKEN, MAPD_WORKER_TOKEN=WORKER_TOKEN, **extra))
        r = second(MAPD, "--listen", f"127.0.0.1:{port}", "--metrics-listen", "127.0.0.1:0")
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"cannot listen on 127.0.0.1:{port}: the port is taken" in r.stderr, r.stderr
        assert "serving on port" not in r.stdout
        r = second(MAPD, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--store", str(tmp_path / "jobs.db"))
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"the job store {tmp_path / 'jobs.db'} is in use by another process (pid {proc.pid})" in r.stderr, r.stderr
        metrics_port = int(mapd_metrics_port(proc))
        r = second(MAPD_WORKER, "--coordinator", env["MAPD_ADDRESS"], "--cpu-devices", "1", "--hostname", "w",
                   "--work-dir", str(tmp_path / "w"), "--metrics-listen", f"127.0.0.1:{metrics_port}", MAPD_CALIBRATION="off")
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"port {metrics_port} is taken" in r.stderr, r.stderr
        # --rank-ports: a range the kernel's ephemeral one (where the ranks' ports come from) does
        # not lie in is refused, saying what to set; the kernel's own range is taken.
        low, high = (int(v) for v in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
        r = second(MAPD_WORKER, "--coordinator", env["MAPD_ADDRESS"], "--rank-ports", f"{low + 1}-{high}", "--metrics-listen", "",
                   MAPD_CALIBRATION="off")
        assert r.returncode == 1, r.stdout + r.stderr
        assert f'sysctl -w net.ipv4.ip_local_port_range="{low + 1} {high}"' in r.stderr, r.stderr
        r = second(MAPD_WORKER, "--rank-ports", "80-70")
        assert r.returncode == 1 and "--rank-ports '80-70' is not LO-HI" in r.stderr, r.stderr
        assert json.loads(mapctl(env, "jobs", "-o", "json", check=0).stdout) == []  # the first still serves
    finally:
        stop(proc)


def test_a_jobs_rendezvous_store_admits_only_its_secret(tmp_path):
    """Issue 50: a job's rank 0 hosts its rendezvous store behind a gate that admits only the secret
    the coordinator drew for the attempt; the ranks on the other worker reach it through their
    tunnel, while c10d's own client (as anyone on the network would use) and a wrong secret are
    turned away, and the job trains on."""
    import datetime
    import re
    import socket
    import time
    import torch.distributed as dist
    proc, port = start_mapd(tmp_path / "jobs.db", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta")]
        mapctl(env, "submit", "mlp:in=4,hidden=8,layers=1,out=3,batch=4", "--ranks", "4", "--steps", "1000000", check=0)
        store = None
        deadline = time.time() + 60
        while store is None and time.time() < deadline:
            found = re.search(r"kind=rendezvous worker=w-\d+ job=1 attempt=0 store=(\S+)", (tmp_path / "mapd.log").read_text())
            store = found.group(1) if found else time.sleep(0.1)
        assert store, (tmp_path / "mapd.log").read_text()
        host, gate_port = store.rsplit(":", 1)
        wait_for_step(env, 1, 2)  # all 4 ranks met: 2 on the other worker came through their tunnel
        # c10d's TCPStore client, without the secret: the gate never lets it reach the store.
        started = time.time()
        with pytest.raises(RuntimeError):
            client = dist.TCPStore(host, int(gate_port), is_master=False, timeout=datetime.timedelta(seconds=3))
            client.set("intruder", "1")
            client.get("intruder")
        assert time.time() - started < 30
        # The gate's handshake with a wrong secret: refused ('N'), then closed.
        with socket.create_connection((host, int(gate_port)), timeout=10) as s:
            s.sendall(b"MAPDSTR1" + b"0" * 32)
            assert s.recv(1) == b"N"
            assert s.recv(1) == b""
        # The job was not disturbed: it trains on, then is cancelled.
        step = int(json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout).get("step", 0))
        wait_for_step(env, 1, step + 5)
        mapctl(env, "cancel", "1", check=0)
        assert mapctl(env, "watch", "1").returncode == 3  # cancelled
    finally:
        stop_all(proc, workers)


def mapd_metrics_port(proc):
    """The metrics port a mapd started by start_mapd announced (its second stdout line)."""
    line = proc.stdout.readline()
    assert "metrics on http://" in line, line
    return line.strip().rsplit(":", 1)[1].split("/")[0]


def test_workers_register_keep_their_lease_and_are_lost_when_they_stop(tmp_path):
    import time
    import urllib.request
    assert MAPD_WORKER and os.path.exists(MAPD_WORKER), "set MAPD_WORKER to the mapd-worker binary (ctest does)"
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "1", "--heartbeat-seconds", "0.2")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta")]
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
        stop_all(proc, workers)


def stop_all(proc, workers):
    """Kills the workers still running, then stops mapd (which must exit 0)."""
    for w, _ in workers:
        if w.poll() is None:
            w.kill()
    stop(proc)


def start_worker(env, tmp, name, *flags):
    w = subprocess.Popen([MAPD_WORKER, "--cpu-devices", "2", "--memory-per-device", str(1 << 30), "--hostname", name,
                          "--metrics-listen", "127.0.0.1:0", "--work-dir", str(tmp / name), *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env, MAPD_WORKER_TOKEN=WORKER_TOKEN))
    metrics_line = w.stdout.readline()
    assert "metrics on http://" in metrics_line, metrics_line + w.stderr.read()
    registered = w.stdout.readline()
    assert "registered as w-" in registered, registered + w.stderr.read()
    return w, metrics_line.split("metrics on ")[1].strip()


def scrape(url):
    import urllib.request
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    return text


def sample(text, name, **labels):
    """The value of the one sample of `name` whose labels include `labels`, or None (rank series
    carry worker and device labels besides job_id and rank)."""
    import re
    found = []
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == str(v) for k, v in labels.items()):
            found.append(float(m.group(3)))
    assert len(found) <= 1, f"{len(found)} samples of {name} with {labels}"
    return found[0] if found else None


def wait_for_step(env, job, step, timeout=60):
    import time
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = json.loads(mapctl(env, "get", str(job), "-o", "json", check=0).stdout)
        if int(got.get("step", 0)) >= step:
            return got
        assert got["state"] in ("PENDING", "PLANNING", "RUNNING"), got
        time.sleep(0.2)
    raise AssertionError(f"job {job} did not reach step {step}")


def test_jobs_run_on_two_workers_are_cancelled_and_fail_when_a_worker_is_lost(tmp_path):
    """The coordinator plans a job, places its 4 ranks on two workers, they train on real text
    under a warm-up and cosine schedule and the loss falls; a running job is cancelled; a worker
    killed mid-job fails its job."""
    import pathlib
    import time
    repo = pathlib.Path(__file__).resolve().parents[2]  # the workers' --data-root: the job reads README.md there
    gpt = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "2", "--heartbeat-seconds", "0.25")
    coordinator_metrics = proc.stdout.readline().split("metrics on ")[1].strip()
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name, "--data-root", str(repo)) for name in ("alpha", "beta")]
        # 1. A job on both workers succeeds, and its loss falls.
        schedule = ("--lr", "0.002", "--lr-schedule", "cosine", "--warmup-steps", "4", "--min-lr", "0.0002")
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", "40", "--data", "text:README.md", *schedule, check=0)
        r = mapctl(env, "watch", "1", check=None)
        assert r.returncode == 0, r.stdout + r.stderr
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
        messages = [e["message"] for e in events]
        assert any("running on w-1 (rank 0-1), w-2 (rank 2-3)" in m for m in messages), messages
        losses = [e["loss"] for e in events if int(e.get("step", 0)) > 0]
        assert len(losses) == 40, messages
        # Each step's rate is the schedule's: warm-up to the peak at step 4, the floor at step 40.
        rates = {int(e["step"]): e["lr"] for e in events if int(e.get("step", 0)) > 0}
        assert abs(rates[1] - 0.0005) < 1e-12 and abs(rates[4] - 0.002) < 1e-12 and abs(rates[40] - 0.0002) < 1e-12, rates
        assert all(rates[s + 1] < rates[s] for s in range(4, 40)), rates
        assert "(cosine to 0.0002 after 4 warm-up steps)" in mapctl(env, "get", "1", check=0).stdout
        assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
        assert events[-1]["state"] == "SUCCEEDED" and "trained 40 steps on 4 rank(s)" in messages[-1], messages[-1]
        assert any("checkpoint: step 40 committed on every worker" in m for m in messages), messages
        assert (tmp_path / "alpha" / "job-1" / "checkpoints" / "step-00000040" / "rank_1.pb").exists()
        assert (tmp_path / "beta" / "job-1" / "checkpoints" / "LATEST").read_text() == "40"
        # Both endpoints pass promtool; the worker's show step time, throughput, MFU, memory
        # measured against predicted, and collectives.
        text = scrape(workers[1][1])
        assert sample(text, "mapd_worker_step", job_id="1", rank="3") == 40
        assert abs(sample(text, "mapd_worker_learning_rate", job_id="1", rank="3") - 0.0002) < 1e-12
        assert sample(text, "mapd_worker_step_seconds_count", job_id="1", rank="2") == 40
        # Tokens counted: each rank its share of the job's (40 steps of batch 4 x 16 tokens, over 4 ranks).
        tokens = [sample(text, "mapd_worker_tokens_total", job_id="1", rank=r) for r in ("2", "3")]
        assert tokens == [40 * 4 * 16 / 4] * 2, tokens
        assert sample(text, "mapd_worker_samples_total", job_id="1", rank="2") is None
        assert 0 < sample(text, "mapd_worker_model_flops_utilization_ratio", job_id="1", rank="2") < 1
        # Rank series carry the worker's id and the rank's device (to join with DCGM's series).
        assert sample(text, "mapd_worker_step", job_id="1", rank="3", worker="w-2", device="cpu:1") == 40
        assert sample(text, "mapd_build_info", component="worker") == 1
        measured = sample(text, "mapd_worker_memory_peak_bytes", job_id="1", rank="2")
        predicted = sample(text, "mapd_worker_predicted_peak_bytes", job_id="1", rank="2")
        assert measured > 0 and predicted > 0 and abs(predicted - measured) / measured < 0.5, (measured, predicted)
        assert sample(text, "mapd_worker_collective_bytes_total", job_id="1", kind="all_reduce", rank="2") > 0
        assert sample(text, "mapd_worker_collectives_total", job_id="1", kind="all_reduce", rank="2") >= 40  # one a step at least
        assert sample(text, "mapd_worker_jobs_total", outcome="succeeded") == 1
        text = scrape(coordinator_metrics)
        assert sample(text, "mapd_jobs", state="SUCCEEDED") == 1 and sample(text, "mapd_workers", state="ALIVE") == 2

        # 2. Cancelling a running job stops its ranks on both workers.
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", "100000", check=0)
        wait_for_step(env, 2, 2)
        assert "job 2: CANCELLED" in mapctl(env, "cancel", "2", check=0).stdout
        assert mapctl(env, "watch", "2", check=None).returncode == 3
        deadline = time.time() + 20
        while time.time() < deadline:
            running = [sample(scrape(url), "mapd_worker_ranks_running") for _, url in workers]
            if running == [0, 0]:
                break
            time.sleep(0.3)
        assert running == [0, 0], running
        # On both workers the job counts as stopped, also where a rank failed first because its
        # peers on the other worker had been stopped.
        for _, url in workers:
            text = scrape(url)
            assert sample(text, "mapd_worker_jobs_total", outcome="cancelled") == 1, text
            assert sample(text, "mapd_worker_jobs_total", outcome="failed") == 0, text

        # 3. A worker lost mid-job fails the job, naming it; the other worker's ranks stop.
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", "100000", check=0)
        wait_for_step(env, 3, 2)
        workers[1][0].kill()
        workers[1][0].wait()
        assert mapctl(env, "watch", "3", check=None).returncode == 1
        got = json.loads(mapctl(env, "get", "3", "-o", "json", check=0).stdout)
        assert got["state"] == "FAILED" and "worker w-2 was lost" in got["error"], got
        # Which case applies (issue 50): killed before its first checkpoint, nothing to resume from.
        assert "(no checkpoint committed yet to restart from)" in got["error"], got
        deadline = time.time() + 20
        while time.time() < deadline and sample(scrape(workers[0][1]), "mapd_worker_ranks_running") != 0:
            time.sleep(0.3)
        assert sample(scrape(workers[0][1]), "mapd_worker_ranks_running") == 0
        workers[0][0].send_signal(signal.SIGTERM)
        assert workers[0][0].wait(timeout=20) == 0
    finally:
        stop_all(proc, workers)


def test_workers_measure_their_host_once_and_jobs_are_costed_on_it(tmp_path):
    """Issue 49: a worker measures its host at start and keeps it per host and build (a second
    worker — or a restart — reads it in well under a second), sends it with its registration, and
    the coordinator plans a job without a device_type on it: the plan names the measured profile,
    and the job's step time is set beside the prediction. `mapctl run` reads the same cache."""
    import time
    proc, port = start_mapd(tmp_path / "jobs.db")
    # MAPD_FAKE_RUNNABLE: the host counts as quiet however many tests run beside this one (a busy
    # host's measurement is measured again on a quiet one: CalibrationCache.* covers that).
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN, "MAPD_CALIBRATION": "auto", "MAPD_CACHE_DIR": str(tmp_path / "cache"),
           "MAPD_FAKE_RUNNABLE": "0"}
    workers = []
    try:
        started = time.monotonic()
        workers.append(start_worker(env, tmp_path, "first"))
        measuring = time.monotonic() - started
        assert (tmp_path / "cache" / "host-calibration.json").exists()
        started = time.monotonic()
        workers.append(start_worker(env, tmp_path, "second"))
        cached = time.monotonic() - started
        assert cached < 5 and cached < measuring, (measuring, cached)
        listed = json.loads(mapctl(env, "workers", "-o", "json", check=0).stdout)
        profiles = [w["profile"] for w in listed]
        assert all(p["source"] == "measured" and p["fp32_flops"] > 0 for p in profiles), profiles
        assert profiles[0]["key"] == profiles[1]["key"] and "software: MAP" in profiles[0]["key"], profiles
        assert "measured 20" in mapctl(env, "workers", check=0).stdout
        # mapctl run's default (--device-type auto) reads the workers' calibration: no second measurement.
        r = mapctl(env, "run", GPT, "--ranks", "2", "--steps", "2", "-o", "json", check=0)
        assert "measuring this host" not in r.stderr, r.stderr
        assert json.loads(r.stdout)["device_type"].startswith("measured-this-host-"), r.stdout[:400]
        # A job without a device type is costed on the workers' measured profile.
        mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "6", check=0)
        assert mapctl(env, "watch", "1", check=None).returncode == 0
        job = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)
        assert job["state"] == "SUCCEEDED", job
        assert " ms/step predicted on measured-first-" in job["plan_summary"], job["plan_summary"]
        assert job["predicted_step_seconds"] > 0 and job["measured_step_seconds"] > 0, job
        got = mapctl(env, "get", "1", check=0).stdout
        assert "Step time:" in got and "measured / predicted" in got, got
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
        assert any("ms measured (median)" in e["message"] and "ms predicted" in e["message"] for e in events), events[-1]
    finally:
        stop_all(proc, workers)


def test_a_worker_offers_only_devices_it_has(tmp_path):
    """GPUs asked of a worker on a machine (or build) without them: a clear error, exit 1."""
    env = dict(os.environ, MAPD_WORKER_TOKEN=WORKER_TOKEN, MAPD_ADDRESS="127.0.0.1:1")
    try:
        r = subprocess.run([MAPD_WORKER, "--cuda-devices", "1", "--work-dir", str(tmp_path), "--metrics-listen", ""],
                           capture_output=True, text=True, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.skip("this machine offers a GPU (the worker started)")
    assert r.returncode == 1
    assert "--cuda-devices 1:" in r.stderr and "[FAILED_PRECONDITION]" in r.stderr, r.stderr
    r = subprocess.run([MAPD_WORKER, "--cpu-devices", "0", "--work-dir", str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=20)
    assert r.returncode == 1 and "no devices to offer" in r.stderr, r.stderr


def test_a_job_whose_worker_is_lost_resumes_from_its_checkpoint(tmp_path):
    """With checkpoints on storage the coordinator and workers share, a killed worker's job goes
    RESTARTING, is placed again on the devices left, resumes from the last committed step, and
    trains on exactly as it would have (the same losses after the checkpoint)."""
    gpt = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
    ckpt = tmp_path / "checkpoints"
    proc, env = start_checkpointing_mapd(tmp_path, ckpt)
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta", "gamma")]
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", str(RESTART_STEPS), "--checkpoint-every", "10", check=0)
        # Kill a worker two steps or more past a committed checkpoint, so that those steps run again.
        committed, kill_step, events = wait_past_a_checkpoint(env, 1)
        first_placement = next(e["message"] for e in events if e["message"].startswith("running on"))
        assert "w-1 (rank 0-1), w-2 (rank 2-3)" in first_placement, first_placement
        kill_beta_and_expect_a_resume(env, workers, committed, kill_step, RESTART_STEPS)
        assert (ckpt / "job-1" / "LATEST").read_text() == str(RESTART_STEPS)
    finally:
        stop_all(proc, workers)
    # mapd's log tells the story a line each (issue 50): the submission, the placement, the
    # lost worker, the restart and resume, the success.
    log = (tmp_path / "mapd.log").read_text().splitlines()
    for kind, words in [("job", "state=PENDING"), ("job", 'message="running on'), ("worker_lost", "worker=w-2"),
                        ("job", "state=RESTARTING"), ("job", "resumed from the checkpoint of step"), ("job", "state=SUCCEEDED")]:
        assert any(f" kind={kind} " in line and words in line for line in log), (kind, words, "\n".join(log))


def test_without_shared_storage_a_lost_workers_job_resumes_from_the_shards_its_peer_kept(tmp_path):
    """No --checkpoint-dir: each worker commits its ranks' shards on its own disk and pushes a
    copy to its peer (the other worker of the job); a killed worker's job resumes on the workers
    left from its last committed step, the new worker fetching the lost one's shards from its peer,
    and the steps run again have the losses they had (1e-5)."""
    gpt = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "1.5", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta", "gamma")]
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", str(RESTART_STEPS), "--checkpoint-every", "10", check=0)
        committed, kill_step, events = wait_past_a_checkpoint(env, 1)
        kept = next(e["message"] for e in events if "committed on every worker" in e["message"])
        assert "each worker's shards kept by a peer too (w-1's on w-2, w-2's on w-1)" in kept, kept
        kill_beta_and_expect_a_resume(env, workers, committed, kill_step, RESTART_STEPS)
        messages = [e["message"] for e in json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)]
        restarting = next(m for m in messages if "restarting from the checkpoint of step" in m)
        assert "whose shards the workers left keep (no shared storage: each worker's are kept by a peer too)" in restarting, restarting
        # gamma (w-3), which never held ranks 2-3, resumed them with the losses they had: it read
        # them from alpha's copy of beta's shards (alpha's store, beside its own).
        assert (tmp_path / "gamma" / "job-1-1").is_dir() and not (tmp_path / "gamma" / "job-1").exists()
        # The job has ended: within a heartbeat or two every worker drops its shards (no resume will
        # read them); the run directories keep their own checkpoints.
        deadline = time.time() + 10
        while any((tmp_path / w / "shards" / "job-1").exists() for w in ("alpha", "gamma")) and time.time() < deadline:
            time.sleep(0.1)
        assert not any((tmp_path / w / "shards" / "job-1").exists() for w in ("alpha", "gamma"))
        assert list((tmp_path / "alpha" / "job-1-1" / "checkpoints").glob("step-*/rank_0.pb"))
    finally:
        stop_all(proc, workers)


def test_a_pipeline_job_runs_across_two_workers_and_resumes_when_one_is_lost(tmp_path):
    """pipeline_stages 2: the coordinator plans two stages of two ranks, one on each worker (the
    stages' ranks placed in order), the ranks stream micro-batches through them by 1F1B; a killed
    worker's pipeline job resumes from its last checkpoint on the devices left and trains on as
    it would have."""
    gpt = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
    ckpt = tmp_path / "checkpoints"
    proc, env = start_checkpointing_mapd(tmp_path, ckpt)
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta", "gamma")]
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", str(PIPELINE_RESTART_STEPS), "--checkpoint-every", "10", "--pipeline-stages", "2",
               "--optimizer", "momentum", "--lr", "0.05", check=0)
        committed, kill_step, events = wait_past_a_checkpoint(env, 1)
        messages = [e["message"] for e in events]
        assert any("2 stages x mesh 2" in m and "1F1B" in m for m in messages), messages
        first_placement = next(m for m in messages if m.startswith("running on"))
        assert "w-1 (rank 0-1), w-2 (rank 2-3)" in first_placement, first_placement  # a stage per worker
        kill_beta_and_expect_a_resume(env, workers, committed, kill_step, PIPELINE_RESTART_STEPS)  # beta holds stage 1
        bad = mapctl(env, "submit", gpt, "--ranks", "4", "--steps", "3", "--pipeline-stages", "5")
        assert bad.returncode != 0 and "pipeline_stages '5' is not auto or a count from 1 to 4" in bad.stderr, bad.stderr
    finally:
        stop_all(proc, workers)


def kill_beta_and_expect_a_resume(env, workers, committed, kill_step, steps):
    """Kills worker beta (w-2, ranks 2-3) of job 1 (`steps` steps, a checkpoint every 10); the job must
    restart once from a committed checkpoint on w-1 and w-3, succeed, and repeat the steps after
    that checkpoint with the same losses."""
    workers[1][0].kill()
    workers[1][0].wait()
    r = mapctl(env, "watch", "1", check=None)
    assert r.returncode == 0, r.stdout + r.stderr
    events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
    messages = [e["message"] for e in events]
    restarting = [m for m in messages if "restarting from the checkpoint of step" in m]
    assert len(restarting) == 1 and "worker w-2 was lost" in restarting[0], messages
    resumed_from = int(restarting[0].split("checkpoint of step ")[1].split()[0])
    assert resumed_from >= committed[-1] and resumed_from % 10 == 0, (restarting, committed)
    assert any(f"resumed from the checkpoint of step {resumed_from} on w-1 (rank 0-1), w-3 (rank 2-3)" in m for m in messages), messages
    assert events[-1]["state"] == "SUCCEEDED" and f"trained {steps} steps" in messages[-1], messages[-1]
    assert_resumed_steps_repeat(events, steps, resumed_from, committed[-1], kill_step)


# Steps of the jobs the restart tests interrupt: enough that the job is still running when the
# test, polling `mapctl logs`, has seen a checkpoint and acts (a step of the small GPT takes
# ~2 ms with gradient buckets through shared memory, ~20 ms in two pipeline stages, so 400 steps
# could end between two polls under load — each poll starts a mapctl process).
RESTART_STEPS = 1000  # at most mapd keeps a progress event of every step for (JobManager::kMaxProgressEvents)
PIPELINE_RESTART_STEPS = 400


def start_checkpointing_mapd(tmp_path, ckpt):
    """mapd with short leases and checkpoints on `ckpt` (storage it shares with its workers)."""
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "1.5", "--heartbeat-seconds", "0.25", "--checkpoint-dir", str(ckpt))
    return proc, {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}


def wait_past_a_checkpoint(env, job):
    """Waits until a checkpoint of `job` is committed and two or more steps are done past it (so
    that those steps run again after a resume); returns (committed steps, last step, events)."""
    import time
    deadline = time.time() + 60
    while time.time() < deadline:
        events = json.loads(mapctl(env, "logs", str(job), "-o", "json", check=0).stdout)
        # ("committed to DIR" on shared storage, "committed on every worker" without)
        committed = [int(e["message"].split("step ")[1].split()[0]) for e in events if e["message"].startswith("checkpoint: step ")
                     and ("committed to" in e["message"] or "committed on every worker" in e["message"])]
        last_step = max([int(e.get("step", 0)) for e in events] + [0])
        if committed and last_step >= committed[-1] + 2:
            return committed, last_step, events
        if events and events[-1].get("state") in ("SUCCEEDED", "FAILED", "CANCELLED"):
            raise AssertionError(f"job {job} ended before the test could interrupt it (raise RESTART_STEPS): {events[-1]}")
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint of job {job} committed with two steps past it in 60 s: {events[-3:] if events else 'no events'}")


def assert_resumed_steps_repeat(events, steps, resumed_from, committed, stopped_at):
    """Every step ran; the steps after the checkpoint resumed from that the first attempt had got
    past ran twice with the same losses (1e-5 relative)."""
    seen = {}
    for e in events:
        step = int(e.get("step", 0))
        if step > 0:
            seen.setdefault(step, []).append(e["loss"])
    repeated = {s: l for s, l in seen.items() if len(l) == 2}
    assert min(seen) == 1 and max(seen) == steps and len(seen) == steps, sorted(seen)
    assert all(s > resumed_from for s in repeated), repeated
    if resumed_from == committed:  # (a later checkpoint may have been committed just before the stop)
        assert len(repeated) >= stopped_at - resumed_from >= 2, (repeated, stopped_at, resumed_from)
    for step, (before, after) in repeated.items():
        assert abs(before - after) <= 1e-5 * abs(before), (step, before, after)


@pytest.mark.long  # slow: the long form runs it (scripts/test.sh --long)
def test_a_running_job_resumes_after_a_coordinator_restart(tmp_path):
    """mapd stopped mid-job and started again (same store, same checkpoint storage): its workers
    register again, are told to stop the job's earlier ranks, and the job resumes from its last
    committed checkpoint with the same losses."""
    import time
    gpt = "gpt2:layers=2,hidden=32,heads=2,vocab=256,seq=16,batch=4"
    ckpt = tmp_path / "checkpoints"
    flags = ("--lease-seconds", "1.5", "--heartbeat-seconds", "0.25", "--checkpoint-dir", str(ckpt))
    proc, port = start_mapd(tmp_path / "jobs.db", *flags)
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta")]
        mapctl(env, "submit", gpt, "--ranks", "4", "--steps", str(RESTART_STEPS), "--checkpoint-every", "10", check=0)
        committed, stopped_at, _ = wait_past_a_checkpoint(env, 1)
        stop(proc)
        time.sleep(0.5)
        proc, _ = start_mapd(tmp_path / "jobs.db", *flags, listen=f"127.0.0.1:{port}")
        r = mapctl(env, "watch", "1", check=None)
        assert r.returncode == 0, r.stdout + r.stderr
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
        messages = [e["message"] for e in events]
        restarting = [m for m in messages if "restarting from the checkpoint of step" in m]
        assert len(restarting) == 1 and restarting[0].startswith("the coordinator restarted;"), messages
        resumed_from = int(restarting[0].split("checkpoint of step ")[1].split()[0])
        assert resumed_from >= committed[-1] and resumed_from % 10 == 0, (restarting, committed)
        assert any(f"resumed from the checkpoint of step {resumed_from} on w-1 (rank 0-1), w-2 (rank 2-3)" in m for m in messages), messages
        assert events[-1]["state"] == "SUCCEEDED" and f"trained {RESTART_STEPS} steps" in messages[-1], messages[-1]
        assert json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)["attempt"] == 1
        assert (ckpt / "job-1" / "LATEST").read_text() == str(RESTART_STEPS)
        assert_resumed_steps_repeat(events, RESTART_STEPS, resumed_from, committed[-1], stopped_at)
        # On each worker the first attempt was stopped and the second succeeded.
        for _, url in workers:
            text = scrape(url)
            assert sample(text, "mapd_worker_jobs_total", outcome="cancelled") == 1, text
            assert sample(text, "mapd_worker_jobs_total", outcome="succeeded") == 1, text
    finally:
        stop_all(proc, workers)


def test_a_worker_rides_out_a_coordinator_restart(tmp_path):
    """A coordinator stopped and started again at the same address: its worker keeps running
    (heartbeats in flight at the shutdown are retried) and registers with the new one."""
    import time
    flags = ("--lease-seconds", "1", "--heartbeat-seconds", "0.1")
    proc, port = start_mapd(tmp_path / "jobs.db", *flags)
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, "alpha")]
        stop(proc)
        time.sleep(1.5)  # heartbeats fail while no coordinator is there
        assert workers[0][0].poll() is None, workers[0][0].stderr.read()
        proc, _ = start_mapd(tmp_path / "jobs.db", *flags, listen=f"127.0.0.1:{port}")
        deadline = time.time() + 15
        listed = []
        while time.time() < deadline:
            listed = json.loads(mapctl(env, "workers", "-o", "json", check=0).stdout)
            if [(w["hostname"], w["state"]) for w in listed] == [("alpha", "ALIVE")]:
                break
            time.sleep(0.2)
        assert [(w["hostname"], w["state"]) for w in listed] == [("alpha", "ALIVE")], listed
        assert workers[0][0].poll() is None
    finally:
        stop_all(proc, workers)


def test_a_finished_jobs_series_leave_the_workers_metrics(tmp_path):
    """After --metrics-retention a finished job's series (job_id=...) are dropped; the job counts stay."""
    import time
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "2", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, "alpha", "--metrics-retention", "3")]
        mapctl(env, "submit", "gpt2:layers=1,hidden=32,heads=2,vocab=256,seq=16,batch=4", "--ranks", "2", "--steps", "3",
               check=0)
        assert mapctl(env, "watch", "1", check=None).returncode == 0
        url = workers[0][1]
        text = scrape(url)
        assert sample(text, "mapd_worker_step", job_id="1", rank="0") == 3, text  # kept a while after the end
        deadline = time.time() + 20
        while time.time() < deadline and 'job_id="1"' in text:
            time.sleep(0.25)
            text = scrape(url)
        assert 'job_id="1"' not in text, text
        assert sample(text, "mapd_worker_jobs_total", outcome="succeeded") == 1, text
    finally:
        stop_all(proc, workers)


def test_a_job_runs_in_micro_batches(tmp_path):
    """micro_batches: the coordinator plans the job in passes (pinned, or auto under a budget one
    pass overruns) and the worker's ranks train in them; the plan says so."""
    long_gpt = "gpt2:layers=2,hidden=64,heads=4,vocab=64,seq=256,batch=16"
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "2", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name) for name in ("alpha", "beta")]
        mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3", "--micro-batches", "2", check=0)
        assert mapctl(env, "watch", "1", check=None).returncode == 0
        messages = [e["message"] for e in json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)]
        assert any("2 micro-batches" in m for m in messages), messages
        assert "trained 3 steps" in messages[-1], messages[-1]
        mapctl(env, "submit", long_gpt, "--ranks", "4", "--steps", "2", "--memory-per-device", "10MiB", "--recompute", "off",
               "--micro-batches", "auto", check=0)
        assert mapctl(env, "watch", "2", check=None).returncode == 0
        events = json.loads(mapctl(env, "logs", "2", "-o", "json", check=0).stdout)
        assert any("micro-batches" in e["message"] for e in events), [e["message"] for e in events]
        assert events[-1]["state"] == "SUCCEEDED", events[-1]
        bad = mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3", "--micro-batches", "0")
        assert bad.returncode != 0 and "micro_batches '0'" in bad.stderr, bad.stderr
        # precision: the coordinator plans the bf16 graph and the ranks train it.
        mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3", "--precision", "bf16", check=0)
        assert mapctl(env, "watch", "3", check=None).returncode == 0
        messages = [e["message"] for e in json.loads(mapctl(env, "logs", "3", "-o", "json", check=0).stdout)]
        assert any(", bf16," in m for m in messages), messages
        assert "trained 3 steps" in messages[-1], messages[-1]
        bad = mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3", "--precision", "fp8")
        assert bad.returncode != 0 and "precision 'fp8'" in bad.stderr, bad.stderr
        # --pin: the coordinator plans the pinned configuration (two stages, two micro-batches of
        # two samples) and the ranks train it.
        mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3", "--pin", "pp=2,mbs=2", check=0)
        assert mapctl(env, "watch", "4", check=None).returncode == 0
        messages = [e["message"] for e in json.loads(mapctl(env, "logs", "4", "-o", "json", check=0).stdout)]
        assert any("2 stages x mesh 1" in m and "2 micro-batches" in m for m in messages), messages
        assert "trained 3 steps" in messages[-1], messages[-1]
        assert json.loads(mapctl(env, "get", "4", "-o", "json", check=0).stdout)["spec"]["pin"] == "pp=2,mbs=2"
        bad = mapctl(env, "submit", GPT, "--ranks", "2", "--steps", "3", "--pin", "tp=3")
        assert bad.returncode != 0 and "pin tp=3: the pinned degrees" in bad.stderr, bad.stderr
        # An interleaved schedule (2 stages x 2 chunks of a 4-layer GPT a device) runs as a job too.
        gpt4 = GPT.replace("layers=2", "layers=4")
        mapctl(env, "submit", gpt4, "--ranks", "2", "--steps", "3", "--pin", "pp=2,schedule=interleaved:2", check=0)
        assert mapctl(env, "watch", "5", check=None).returncode == 0
        messages = [e["message"] for e in json.loads(mapctl(env, "logs", "5", "-o", "json", check=0).stdout)]
        assert any("interleaved 1F1B, 2 chunks a device" in m for m in messages), messages
        assert "trained 3 steps" in messages[-1], messages[-1]
    finally:
        stop_all(proc, workers)


def test_a_job_trains_with_its_weight_decay_and_clipping_searched_once(tmp_path):
    """--weight-decay and --max-grad-norm (--clip) reach a job's ranks through its training config:
    the job's losses on 2 ranks are one process's with the same flags (mapctl run), and not those
    of a run without them. The job is searched once (admission's plan is the one it runs)."""
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "2", "--heartbeat-seconds", "0.25")
    coordinator_metrics = proc.stdout.readline().split("metrics on ")[1].strip()
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    training = ("--steps", "6", "--optimizer", "sgd", "--lr", "0.5", "--seed", "3")
    regularised = ("--weight-decay", "0.2", "--clip", "0.05")
    try:
        workers = [start_worker(env, tmp_path, "alpha")]
        mapctl(env, "submit", GPT, "--ranks", "2", *training, *regularised, check=0)
        assert mapctl(env, "watch", "1", check=None).returncode == 0
        assert "weight decay 0.2, gradients clipped to norm 0.05" in mapctl(env, "get", "1", check=0).stdout
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", "--all-steps", check=0).stdout)
        job = [e["loss"] for e in events if int(e.get("step", 0)) > 0]

        def run(*flags):
            out = json.loads(mapctl(env, "run", GPT, *training, *flags, "-o", "json", check=0).stdout)
            return [s["loss"] for s in out["steps"]]
        same, plain = run(*regularised), run()
        assert len(job) == len(same) == 6, (job, same)
        assert all(abs(a - b) < 1e-4 for a, b in zip(job, same)), (job, same)
        assert max(abs(a - b) for a, b in zip(job, plain)) > 1e-2, (job, plain)
        # The job was searched once, at admission: it started on that plan.
        text = scrape(coordinator_metrics)
        assert sample(text, "mapd_plan_searches_total", phase="admission") == 1, text
        assert sample(text, "mapd_plan_searches_total", phase="dispatch") == 0, text
        assert any("placing on the plan admission made for 2 rank(s)" in e["message"] for e in events), events
    finally:
        stop_all(proc, workers)


def test_a_job_trains_on_numpy_arrays_under_the_workers_data_root(tmp_path, models):
    """npy:IMAGES,LABELS in a job: both files resolved under the worker's --data-root, the ranks
    train on them (a ResNet, its batch norms over each rank's half of the batch: --batch-norm
    local); a path out of the root is refused at submission, a file missing there fails
    the job saying so."""
    from test_run_ranks import _save_image_classes
    d, _ = models
    data = tmp_path / "data"
    data.mkdir()
    _save_image_classes(data)
    model = (str(d / "resnet_trace_train.pt"), "--input", "x:f32[8,3,32,32]", "--ranks", "2")
    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "2", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, "alpha", "--data-root", str(data))]
        # Batch norms over each rank's half of the batch, as DDP's (the graph grouped at admission).
        mapctl(env, "submit", *model, "--steps", "20", "--lr", "0.003", "--data", "npy:images.npy,labels.npy", "--batch-norm", "local",
               check=0)
        spec = json.loads(mapctl(env, "get", "1", "-o", "json", check=0).stdout)["spec"]
        assert spec["batch_norm"] == "local" and spec["batch_norm_groups"] == 2, spec
        assert mapctl(env, "watch", "1", check=None).returncode == 0
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
        losses = [e["loss"] for e in events if int(e.get("step", 0)) > 0]
        assert events[-1]["state"] == "SUCCEEDED" and len(losses) == 20, events[-1]
        assert sum(losses[-5:]) / 5 < 0.9 * sum(losses[:5]) / 5, losses
        bad = mapctl(env, "submit", *model, "--data", "npy:images.npy,../labels.npy")
        assert bad.returncode != 0 and "without '..'" in bad.stderr, bad.stderr
        mapctl(env, "submit", *model, "--steps", "2", "--data", "npy:images.npy,missing.npy", check=0)
        assert mapctl(env, "watch", "2", check=None).returncode != 0
        messages = [e["message"] for e in json.loads(mapctl(env, "logs", "2", "-o", "json", check=0).stdout)]
        assert any("job data 'missing.npy' is not a readable file under this worker's --data-root" in m for m in messages), messages
    finally:
        stop_all(proc, workers)


def test_a_traced_nanogpt_trained_through_mapd_with_evaluation_comes_back_to_pytorch(tmp_path):
    """Issue 20's round trip: a traced nanoGPT (dropout 0.1) trained through mapd on two workers
    (4 ranks) under warm-up + cosine on generated sentences as characters, evaluated every 20
    steps on held-out text: the evaluation loss falls (job events, get, the eval-loss gauge); the
    export of both workers' checkpoints loads into nanogpt.GPT with load_state_dict(strict=True),
    and PyTorch's eval-mode loss on the evaluation batch equals MAP's last evaluation within 1e-4."""
    import pathlib
    import sys
    import warnings
    import numpy as np
    import torch
    import torch.nn.functional as F
    repo = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "tests" / "import" / "models"))
    import nanogpt
    torch.manual_seed(0)
    config = nanogpt.GPTConfig()
    assert config.dropout > 0
    # Text from a small fixed grammar (seeded: the same whatever the repository's files say):
    # sentences of common words, which a character model learns past their letters' frequencies.
    rng = np.random.default_rng(0)
    words = ("the model trains on many devices and the planner finds a plan that fits their memory so each rank "
             "keeps its shard of the weights while the coordinator watches every worker").split()
    sentences = (" ".join(rng.choice(words, size=rng.integers(4, 10))) + ". " for _ in range(700))
    text = np.frombuffer("".join(sentences).encode(), dtype=np.uint8).astype(np.int64) % config.vocab_size
    seq, held_out = config.block_size, len(text) - 200
    windows = lambda starts: (np.stack([text[s:s + seq] for s in starts]), np.stack([text[s + 1:s + seq + 1] for s in starts]))  # noqa: E731
    data = tmp_path / "data"
    data.mkdir()
    train_x, train_y = windows(range(0, held_out - seq - 1, 7))
    eval_x, eval_y = windows(range(held_out, held_out + 4 * (seq + 1), seq + 1))  # one batch of B held-out windows
    for name, array in (("train_x", train_x), ("train_y", train_y), ("eval_x", eval_x), ("eval_y", eval_y)):
        np.save(data / f"{name}.npy", array)
    example = torch.from_numpy(eval_x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.jit.trace(nanogpt.GPT(config).train(), (example,), check_trace=False).save(str(tmp_path / "gpt.pt"))

    proc, port = start_mapd(tmp_path / "jobs.db", "--lease-seconds", "2", "--heartbeat-seconds", "0.25")
    env = {"MAPD_ADDRESS": f"127.0.0.1:{port}", "MAPD_TOKEN": TOKEN}
    workers = []
    try:
        workers = [start_worker(env, tmp_path, name, "--data-root", str(data)) for name in ("alpha", "beta")]
        mapctl(env, "submit", str(tmp_path / "gpt.pt"), "--input", f"idx:i64[4,{seq}]", "--ranks", "4", "--steps", "100",
               "--optimizer", "adamw", "--lr", "0.003", "--lr-schedule", "cosine", "--warmup-steps", "10", "--min-lr", "0.0003",
               "--data", "npy:train_x.npy,train_y.npy", "--eval-data", "npy:eval_x.npy,eval_y.npy", "--eval-every", "20",
               "--checkpoint-every", "100", check=0)
        r = mapctl(env, "watch", "1", check=None)
        assert r.returncode == 0, r.stdout + r.stderr
        events = json.loads(mapctl(env, "logs", "1", "-o", "json", check=0).stdout)
        evals = [e["evaluation"] for e in events if "evaluation" in e]
        assert [int(e["step"]) for e in evals] == [20, 40, 60, 80, 100], events
        assert evals[-1]["loss"] < evals[0]["loss"] - 0.2, evals
        assert any("eval after step 100: loss" in e["message"] for e in events), [e["message"] for e in events]
        assert f"eval loss {evals[-1]['loss']:.4f} after step 100" in mapctl(env, "get", "1", check=0).stdout
        gauges = [sample(scrape(url), "mapd_worker_eval_loss", job_id="1", rank="0") for _, url in workers]
        assert [abs(g - evals[-1]["loss"]) < 1e-6 for g in gauges if g is not None] == [True], (gauges, evals)  # rank 0's worker
        bad = mapctl(env, "submit", GPT, "--eval-every", "5", "--eval-data", "npy:../eval_x.npy")
        assert bad.returncode != 0 and "eval_data: data 'npy:../eval_x.npy': give a file relative" in bad.stderr, bad.stderr
        bad = mapctl(env, "submit", GPT, "--ranks", "2", "--pipeline-stages", "2", "--eval-every", "5")
        assert bad.returncode != 0 and "evaluation under pipeline stages is not built yet" in bad.stderr, bad.stderr
        # Both workers' ranks' shards, gathered: what PyTorch loads.
        dirs = [str(tmp_path / w / "job-1" / "checkpoints") for w in ("alpha", "beta")]
        run_mapctl("export", *dirs, "-o", str(tmp_path / "weights.pt"), check=0)
    finally:
        stop_all(proc, workers)
    module = nanogpt.GPT(config)
    module.load_state_dict(torch.load(tmp_path / "weights.pt"), strict=True)
    module.eval()
    with torch.no_grad():
        logits = module(example)
        want = F.cross_entropy(logits.view(-1, logits.size(-1)), torch.from_numpy(eval_y).view(-1)).item()
    assert abs(want - evals[-1]["loss"]) <= 1e-4 * abs(want), (want, evals)


"""mapclient (client/python, docs/python.md) installed as a user would — a venv made with
--system-site-packages (Debian's grpcio, protobuf, torch), `pip install --no-index
--no-build-isolation client/python` generating the stubs — driving a real mapd and mapd-worker:
a traced torch.nn.Module trained in three lines, a watch that rides out a coordinator restart,
the errors, the planner and TLS. Every call runs in the venv's python (a script per test)."""
import json
import os
import signal
import subprocess
import textwrap
import time

import pytest

MAPD = os.environ.get("MAPD", "")
MAPD_WORKER = os.environ.get("MAPD_WORKER", "")
MAPCTL = os.environ.get("MAPCTL", "")
SOURCE_DIR = os.path.abspath(os.environ.get("MAPD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
PACKAGE_DIR = os.path.join(SOURCE_DIR, "client", "python")
TOKEN = "mapclient-test-token"
WORKER_TOKEN = "mapclient-test-worker-token"
GPT = "gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4"

# The model the scripts train: a 2-layer MLP whose forward returns its cross-entropy loss
# (MAP trains output 0 of a graph: the loss), inputs x f32[8,16] and targets y i64[8].
MLP = textwrap.dedent("""\
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(16, 32)
            self.fc2 = torch.nn.Linear(32, 4)

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.fc2(torch.relu(self.fc1(x))), y)

    torch.manual_seed(0)
    model = MLP()
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    """)


def _need_binaries():
    for name, path in (("MAPD", MAPD), ("MAPD_WORKER", MAPD_WORKER), ("MAPCTL", MAPCTL)):
        assert path and os.path.exists(path), f"set {name} to the binary (ctest does)"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv with mapclient installed by docs/python.md's commands; returns its python."""
    _need_binaries()
    root = tmp_path_factory.mktemp("venv")
    r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(root)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"cannot make a venv (Debian: python3-venv python3-pip): {r.stdout}{r.stderr}"
    r = subprocess.run([str(root / "bin" / "pip"), "install", "--no-index", "--no-build-isolation", PACKAGE_DIR],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return str(root / "bin" / "python")


def run_script(venv, tmp_path, code, *, env=None, timeout=120, check=True):
    """Runs `code` in the venv's python (cwd: a scratch directory); returns the JSON object of its
    last stdout line (or the CompletedProcess with check=False)."""
    script = tmp_path / f"script_{time.monotonic_ns()}.py"
    script.write_text(code)
    base = {k: v for k, v in os.environ.items() if not k.startswith("MAPD_")}  # nothing leaks from the outside
    full = dict(base, MAPCTL=MAPCTL, PYTHONUNBUFFERED="1")
    full.update(env or {})  # (may replace MAPCTL)
    r = subprocess.run([venv, str(script)], capture_output=True, text=True, timeout=timeout, cwd=str(tmp_path), env=full)
    if not check:
        return r
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def start_mapd(store, *flags, listen="127.0.0.1:0"):
    # mapd's log (a line per job event) to a file beside the store: a pipe no one reads would fill
    # and stall it.
    log = open(os.path.join(os.path.dirname(str(store)), "mapd.log"), "a")
    proc = subprocess.Popen([MAPD, "--listen", listen, "--metrics-listen", "127.0.0.1:0", "--store", str(store),
                             "--lease-seconds", "2", "--heartbeat-seconds", "0.25", *flags],
                            stdout=subprocess.PIPE, stderr=log, text=True,
                            env=dict(os.environ, MAPD_TOKEN=TOKEN, MAPD_WORKER_TOKEN=WORKER_TOKEN))
    line = proc.stdout.readline()
    assert "serving on port" in line, line + open(log.name).read()
    return proc, int(line.split("serving on port ")[1].split()[0])


def start_worker(port, work_dir):
    w = subprocess.Popen([MAPD_WORKER, "--coordinator", f"127.0.0.1:{port}", "--cpu-devices", "2", "--memory-per-device",
                          str(1 << 30), "--hostname", "alpha", "--metrics-listen", "127.0.0.1:0", "--work-dir", str(work_dir)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, MAPD_WORKER_TOKEN=WORKER_TOKEN))
    metrics_line = w.stdout.readline()
    assert "metrics on http://" in metrics_line, metrics_line + w.stderr.read()
    registered = w.stdout.readline()
    assert "registered as w-" in registered, registered + w.stderr.read()
    return w


def stop(proc):
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=20) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """mapd (a temp store, port 0) and one mapd-worker with two CPU devices; yields the address."""
    _need_binaries()
    tmp = tmp_path_factory.mktemp("cluster")
    proc, port = start_mapd(tmp / "jobs.db")
    worker = None
    try:
        worker = start_worker(port, tmp / "work")
        yield f"127.0.0.1:{port}"
    finally:
        stop(worker)
        stop(proc)


def test_pip_install_generates_the_stubs_inside_the_package(venv, tmp_path):
    """The stubs are generated at install time into mapclient._proto (imports rewritten: no
    top-level `mapd` module), with type stubs; the package is the installed copy."""
    got = run_script(venv, tmp_path, textwrap.dedent("""\
        import importlib.util, json, os
        import mapclient, mapclient.proto
        from mapclient._proto.mapd.v1 import job_service_pb2_grpc
        pkg = os.path.dirname(mapclient.__file__)
        print(json.dumps({"file": mapclient.__file__, "mapd_module": importlib.util.find_spec("mapd") is not None,
                          "pyi": os.path.exists(os.path.join(pkg, "_proto", "mapd", "v1", "jobs_pb2.pyi")),
                          "typed": os.path.exists(os.path.join(pkg, "py.typed")),
                          "spec_module": mapclient.proto.jobs_pb2.JobSpec.__module__,
                          "stub": job_service_pb2_grpc.JobServiceStub.__name__}))
        """))
    assert "site-packages" in got["file"] and not got["file"].startswith(PACKAGE_DIR), got
    assert not got["mapd_module"] and got["pyi"] and got["typed"], got
    assert got["spec_module"] == "mapclient._proto.mapd.v1.jobs_pb2", got


def test_the_installed_package_finds_the_mapctl_built_beside_its_source(venv, tmp_path):
    """After `pip install client/python` and the build, the three lines need no $MAPCTL: with none
    set and no mapctl on PATH, mapclient takes the one built in the source tree it came from."""
    build = os.path.relpath(MAPCTL, SOURCE_DIR).split(os.sep)[0]  # the build folder, as scripts/build.sh names it
    code = "import json\nfrom mapclient._module import find_mapctl\nprint(json.dumps({'found': find_mapctl()}))\n"
    got = run_script(venv, tmp_path, code, env={"MAPCTL": "", "PATH": "/usr/bin:/bin", "MAPD_BUILD_DIR": build})
    assert os.path.samefile(got["found"], MAPCTL), got
    missing = run_script(venv, tmp_path, code, env={"MAPCTL": "", "PATH": "/usr/bin:/bin", "MAPD_BUILD_DIR": "no-such-build"},
                         check=False)
    assert missing.returncode != 0 and "mapctl was not found" in missing.stderr and "build MAP" in missing.stderr, missing.stderr


def test_three_lines_train_a_traced_module_on_two_ranks(venv, cluster, tmp_path):
    """docs/python.md's three lines: a traced 2-layer MLP (its forward returns the cross-entropy
    loss) submitted on 2 ranks for 5 steps and followed to SUCCEEDED; the job trains the module's
    own weights, sent inside its graph."""
    start = time.monotonic()
    got = run_script(venv, tmp_path, MLP + textwrap.dedent(f"""\
        import json, mapclient
        with mapclient.Client({cluster!r}, token={TOKEN!r}) as c:
            job = c.submit(module=model, example_inputs=(x, y), steps=5, ranks=2)
            assert c.wait(job).state == "SUCCEEDED"
            # What the coordinator holds: the module's graph with its weights, the steps' events.
            final = c.get(job)
            sent = {{p.name: bytes(p.data.inline_data) for p in final.spec.graph.parameters}}
            mine = {{k: v.detach().contiguous().numpy().tobytes() for k, v in model.state_dict().items()}}
            events = c.events(job)
            print(json.dumps({{"state": str(final.state), "name": final.name, "steps": [e.step for e in events if e.step > 0],
                              "seqs": [e.seq for e in events], "last": events[-1].message, "outputs": list(final.spec.graph.outputs),
                              "weights_sent": sent == mine, "files": [p.data.source for p in final.spec.graph.parameters],
                              "logs": c.logs(job), "listed": [(j.id, str(j.state)) for j in c.list()],
                              "rank1": c.logs(job, rank=1), "rank1_tail": c.logs(job, rank=1, tail=2),
                              "rank1_followed": list(c.logs(job, rank=1, follow=True))}}))
            c.delete(job)
            assert [j.id for j in c.list()] == []
        """))
    assert got["state"] == "SUCCEEDED" and got["name"] == "MLP", got
    assert got["steps"] == [1, 2, 3, 4, 5] and got["seqs"] == list(range(1, len(got["seqs"]) + 1)), got
    assert "trained 5 steps on 2 rank(s)" in got["last"] and got["logs"][-1] == got["last"], got
    assert got["outputs"] == ["cross_entropy"] and got["weights_sent"] and got["files"] == [""] * 4, got
    assert (got["listed"][-1][1]) == "SUCCEEDED", got
    # Rank 1's own output, as its worker captured it: a line a step, whole, then its checkpoint.
    assert got["rank1"][0] == "[rank 1] of 2 ranks: steps 1 to 5", got["rank1"]
    assert [line.split()[3] for line in got["rank1"][1:6]] == ["1/5", "2/5", "3/5", "4/5", "5/5"], got["rank1"]
    assert got["rank1_tail"] == got["rank1"][-2:] and got["rank1_followed"] == got["rank1"], got
    assert time.monotonic() - start < 60


def test_a_job_trains_with_the_weight_decay_and_clipping_it_was_submitted_with(venv, cluster, tmp_path):
    """weight_decay and max_grad_norm (training fields, given as keywords) reach the job's ranks:
    its losses on 2 ranks are one process's with the same flags (mapctl run), not those without."""
    got = run_script(venv, tmp_path, textwrap.dedent(f"""\
        import json, mapclient
        with mapclient.Client({cluster!r}, token={TOKEN!r}) as c:
            job = c.submit({GPT!r}, ranks=2, steps=6, optimizer="sgd", lr=0.5, seed=3, weight_decay=0.2, max_grad_norm=0.05)
            assert c.wait(job).state == "SUCCEEDED"
            t = c.get(job).spec.training
            print(json.dumps({{"losses": [e.loss for e in c.events(job) if e.step > 0], "weight_decay": t.weight_decay,
                              "max_grad_norm": t.max_grad_norm}}))
        """))
    assert got["weight_decay"] == 0.2 and got["max_grad_norm"] == 0.05, got

    def run(*flags):
        out = subprocess.run([MAPCTL, "run", GPT, "--steps", "6", "--optimizer", "sgd", "--lr", "0.5", "--seed", "3", *flags,
                              "-o", "json"], capture_output=True, text=True, check=True)
        return [s["loss"] for s in json.loads(out.stdout)["steps"]]
    same, plain = run("--weight-decay", "0.2", "--max-grad-norm", "0.05"), run()
    assert len(got["losses"]) == 6 and all(abs(a - b) < 1e-4 for a, b in zip(got["losses"], same)), (got, same)
    assert max(abs(a - b) for a, b in zip(got["losses"], plain)) > 1e-2, (got, plain)


def test_watch_resumes_after_a_coordinator_restart_without_duplicates(venv, tmp_path):
    """A watch open when mapd stops reconnects to the mapd started again on the same port with the
    same --store, from the last event's seq: every event once, in order, to SUCCEEDED. The job is
    queued (no worker yet) across the restart and runs on a worker started after it."""
    proc, port = start_mapd(tmp_path / "jobs.db")
    address = f"127.0.0.1:{port}"
    worker = watcher = None
    try:
        code = MLP + textwrap.dedent(f"""\
            import json, logging, sys, mapclient
            records = []
            handler = logging.Handler()
            handler.emit = lambda r: records.append(r.getMessage())
            logging.getLogger("mapclient").addHandler(handler)
            logging.getLogger("mapclient").setLevel(logging.INFO)
            with mapclient.Client({address!r}, token={TOKEN!r}) as c:
                job = c.submit(module=model, example_inputs=(x, y), steps=3, ranks=2)
                seen = []
                for event in c.watch(job):
                    seen.append((event.seq, str(event.state), event.message))
                    if event.seq == 2:  # submitted, then waiting for devices: let the test restart mapd
                        print("WATCHING", flush=True)
                all_events = [(e.seq, str(e.state), e.message) for e in c.events(job)]
                again = [e.seq for e in c.watch(job, after_seq=3)]  # after_seq: from the 4th on
                print(json.dumps({{"seen": seen, "events": all_events, "again": again, "log": records,
                                  "final": str(c.get(job).state)}}))
            """)
        script = tmp_path / "watch.py"
        script.write_text(code)
        base = {k: v for k, v in os.environ.items() if not k.startswith("MAPD_")}
        watcher = subprocess.Popen([venv, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=str(tmp_path), env=dict(base, MAPCTL=MAPCTL, PYTHONUNBUFFERED="1"))
        line = watcher.stdout.readline()
        assert line.strip() == "WATCHING", line + watcher.stderr.read()
        stop(proc)
        time.sleep(1.0)  # the watch fails and retries while no coordinator is there
        proc, _ = start_mapd(tmp_path / "jobs.db", listen=address)
        worker = start_worker(port, tmp_path / "work")
        out, err = watcher.communicate(timeout=90)
        assert watcher.returncode == 0, out + err
        got = json.loads(out.strip().splitlines()[-1])
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        stop(worker)
        stop(proc)
    seqs = [s for s, _, _ in got["seen"]]
    assert seqs == list(range(1, len(seqs) + 1)), got["seen"]  # each once, none skipped
    assert [tuple(e) for e in got["seen"]] == [tuple(e) for e in got["events"]], got
    assert got["seen"][0][2].startswith("submitted: MLP") and got["seen"][1][2].startswith("waiting for 2 free"), got["seen"]
    assert got["seen"][-1][1] == "SUCCEEDED" and "trained 3 steps" in got["seen"][-1][2] and got["final"] == "SUCCEEDED", got
    assert any("reconnecting after event #2" in m for m in got["log"]), got["log"]
    assert got["again"] == seqs[3:], got


def test_unknown_keywords_and_models_without_a_loss_are_refused(venv, cluster, tmp_path):
    """submit(stepz=...) is a TypeError naming it and the job fields, nothing submitted; a module
    returning logits is a ValueError; a missing mapctl a MapError NOT_FOUND."""
    got = run_script(venv, tmp_path, MLP + textwrap.dedent(f"""\
        import json, mapclient, torch
        out = {{}}
        with mapclient.Client({cluster!r}, token={TOKEN!r}) as c:
            before = len(c.list())
            try:
                c.submit({GPT!r}, stepz=3)
            except TypeError as e:
                out["unknown"] = str(e)
            try:
                c.plan({GPT!r}, devices=4)
            except TypeError as e:
                out["plan_unknown"] = str(e)
            try:
                c.submit({GPT!r}, module=model)
            except TypeError as e:
                out["twice"] = str(e)
            logits = torch.nn.Sequential(torch.nn.Linear(16, 4))
            try:
                c.submit(module=logits, example_inputs=(x,))
            except ValueError as e:
                out["no_loss"] = str(e)
            try:
                c.submit(module=model, example_inputs=(x, y), mapctl="/nonexistent/mapctl")
            except mapclient.MapError as e:
                out["no_mapctl"] = [e.code, e.message]
            try:
                c.submit({GPT!r}, ranks=3, mesh="2x2")
            except mapclient.MapError as e:
                out["invalid"] = [e.code, e.message]
            try:
                c.submit({GPT!r}, ranks=2, elastic="two")
            except ValueError as e:
                out["bad_elastic"] = str(e)
            # sent, and admitted without shared checkpoint storage too (peer workers keep its shards)
            elastic = c.submit({GPT!r}, ranks=2, checkpoint_every=5, elastic=(1, 2))
            out["elastic"] = [elastic.spec.elastic.min_devices, elastic.spec.elastic.max_devices]
            c.cancel(elastic)
            out["submitted"] = len(c.list()) - before
        print(json.dumps(out))
        """))
    assert "unexpected keyword argument 'stepz'" in got["unknown"] and "ranks, mesh" in got["unknown"], got
    assert "steps" in got["unknown"] and "weight_decay" in got["unknown"], got
    assert "'devices'" in got["plan_unknown"], got
    assert "exactly one of model=" in got["twice"], got
    assert "returns no floating-point scalar" in got["no_loss"] and "FLOAT32[8,4]" in got["no_loss"], got
    assert got["no_mapctl"][0] == "NOT_FOUND" and "/nonexistent/mapctl" in got["no_mapctl"][1], got
    assert got["invalid"][0] == "INVALID_ARGUMENT" and "make them agree" in got["invalid"][1], got
    assert "elastic=" in got["bad_elastic"] and "'MIN:MAX'" in got["bad_elastic"], got
    assert got["elastic"] == [1, 2], got
    assert got["submitted"] == 1, got


def test_a_bad_token_is_unauthenticated(venv, cluster, tmp_path):
    """MapError carries the status code's name and the coordinator's message: a wrong token is
    UNAUTHENTICATED, an unknown job NOT_FOUND, no coordinator UNAVAILABLE; no token at all is
    refused before any call."""
    got = run_script(venv, tmp_path, textwrap.dedent(f"""\
        import json, mapclient
        out = {{}}
        def error(fn):
            try:
                fn()
            except mapclient.MapError as e:
                return [e.code, e.message, str(e)]
        with mapclient.Client({cluster!r}, token="wrong") as c:
            out["bad_token"] = error(c.list)
            out["bad_token_watch"] = error(lambda: list(c.watch(1)))
        out["no_token"] = error(lambda: mapclient.Client({cluster!r}))
        with mapclient.Client({cluster!r}, token={TOKEN!r}) as c:
            out["not_found"] = error(lambda: c.get(99))
        with mapclient.Client("127.0.0.1:1", token={TOKEN!r}, timeout=10) as c:
            out["unreachable"] = error(c.list)
            out["watch_gives_up"] = error(lambda: list(c.watch(1, reconnect_seconds=1)))
        print(json.dumps(out))
        """))
    assert got["bad_token"][0] == "UNAUTHENTICATED" and "not this coordinator's" in got["bad_token"][1], got
    assert got["bad_token"][2].startswith("list: ") and got["bad_token"][2].endswith("[UNAUTHENTICATED]"), got
    assert got["bad_token_watch"][0] == "UNAUTHENTICATED", got
    assert got["no_token"][0] == "FAILED_PRECONDITION" and "MAPD_TOKEN" in got["no_token"][1], got
    assert got["not_found"][0] == "NOT_FOUND", got
    assert got["unreachable"][0] == "UNAVAILABLE" and "is mapd running there?" in got["unreachable"][1], got
    assert got["watch_gives_up"][0] == "UNAVAILABLE" and "gave up after 1." in got["watch_gives_up"][1], got


def test_wait_times_out_and_a_cancel_ends_it(venv, cluster, tmp_path):
    """wait(timeout=) on a job that cannot start (4 ranks, 2 devices) is DEADLINE_EXCEEDED; cancel()
    ends it CANCELLED, which wait() returns; a finished job cannot be cancelled."""
    got = run_script(venv, tmp_path, textwrap.dedent(f"""\
        import json, time, mapclient
        with mapclient.Client({cluster!r}, token={TOKEN!r}) as c:
            job = c.submit({GPT!r}, ranks=4, steps=5, name="too-big")
            start = time.monotonic()
            try:
                c.wait(job, timeout=1.5)
                late = None
            except mapclient.MapError as e:
                late = [e.code, round(time.monotonic() - start, 1)]
            cancelled = c.cancel(job)
            done = c.wait(job)
            try:
                c.cancel(job.id)
                again = None
            except mapclient.MapError as e:
                again = e.code
            print(json.dumps({{"late": late, "cancelled": str(cancelled.state), "done": str(done.state), "finished": done.finished,
                              "again": again, "name": done.name, "mesh": list(done.mesh)}}))
        """))
    assert got["late"][0] == "DEADLINE_EXCEEDED" and 1.4 <= got["late"][1] < 5, got
    assert got["cancelled"] == got["done"] == "CANCELLED" and got["finished"] and got["again"] == "FAILED_PRECONDITION", got
    assert got["name"] == "too-big" and got["mesh"] == [], got


def test_plan_a_zoo_model_and_a_module(venv, cluster, tmp_path):
    """plan() answers PlannerService.Plan's response: a zoo model's plan on 4 ranks, a budget
    nothing fits (not an error: fits is false), and a traced module; profile() predicts."""
    got = run_script(venv, tmp_path, MLP + textwrap.dedent(f"""\
        import json, mapclient
        with mapclient.Client({cluster!r}, token={TOKEN!r}) as c:
            p = c.plan({GPT!r}, ranks=4)
            tight = c.plan({GPT!r}, ranks=2, memory_per_device="1KiB")
            m = c.plan(module=model, example_inputs=(x, y), ranks=2, zero=1)
            pinned = c.plan({GPT!r}, ranks=4, pin="tp=2,dp=2")
            try:
                c.plan({GPT!r}, ranks=4, pin="tp=3")
                bad_pin = ""
            except mapclient.MapError as e:
                bad_pin = str(e)
            prof = c.profile({GPT!r})
            print(json.dumps({{"fits": p.fits, "summary": p.summary, "nodes": len(p.plan.nodes), "graph_nodes": len(p.plan.graph.nodes),
                              "tight": [tight.fits, tight.min_memory_bytes], "module": [m.fits, m.summary],
                              "pinned": pinned.summary, "bad_pin": bad_pin,
                              "params": prof.parameters, "peak": prof.predicted_peak_bytes}}))
        """))
    assert got["fits"] and got["summary"].startswith("mesh ") and got["nodes"] == got["graph_nodes"] > 0, got
    assert got["tight"][0] is False and got["tight"][1] > 1024, got
    assert got["module"][0] and got["module"][1].startswith("mesh "), got
    assert got["pinned"].startswith("mesh 2x2"), got  # --pin tp=2,dp=2: the only mesh that keeps both
    assert "pin tp=3: the pinned degrees" in got["bad_pin"], got
    assert got["params"] > 0 and got["peak"] > 0, got


def test_tls_with_a_ca_file(venv, tmp_path):
    """Client(tls_ca=...) speaks TLS to a mapd started with --tls-cert/--tls-key, as mapctl
    --tls-ca does; plaintext to it fails UNAVAILABLE."""
    if subprocess.run(["which", "openssl"], capture_output=True).returncode != 0:
        pytest.skip("no openssl to make a certificate")

    def openssl(*args):
        r = subprocess.run(["openssl", *args], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "tls.key", "-out", "tls.csr")
    (tmp_path / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1", "-out", "tls.crt",
            "-extfile", "san.ext")
    proc, port = start_mapd(tmp_path / "jobs.db", "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"))
    try:
        got = run_script(venv, tmp_path, textwrap.dedent(f"""\
            import json, mapclient
            (tmp := open("token", "w")).write({TOKEN!r} + "\\n"); tmp.close()
            with mapclient.Client("localhost:{port}", token_file="token", tls_ca={str(tmp_path / "ca.crt")!r}) as c:
                jobs = c.list()
                health = c.health()
            try:
                mapclient.Client("localhost:{port}", token={TOKEN!r}, timeout=5).list()
                plain = None
            except mapclient.MapError as e:
                plain = e.code
            print(json.dumps({{"jobs": len(jobs), "health": health, "plain": plain}}))
            """))
    finally:
        stop(proc)
    assert got == {"jobs": 0, "health": "SERVING", "plain": "UNAVAILABLE"}, got


def test_an_integer_input_takes_a_range_from_python(venv, tmp_path):
    """module_to_graph(input_ranges={"ids": (0, 9999)}): a raw id hashed by % before its embedding
    carries its stated range into the graph (what synthetic data draws from); a range for no
    argument is a TypeError naming the arguments."""
    got = run_script(venv, tmp_path, textwrap.dedent("""\
        import json, mapclient, torch

        class Hashed(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(10, 4)

            def forward(self, ids, y):
                return torch.nn.functional.mse_loss(self.emb(ids % 10).sum(1), y)

        ids, y = torch.randint(0, 9999, (8, 3)), torch.randn(8, 4)
        g = mapclient.module_to_graph(Hashed(), (ids, y), input_ranges={"ids": (0, 9999)})
        out = {i.name: [i.HasField("value_range"), i.value_range.low, i.value_range.high] for i in g.inputs}
        try:
            mapclient.module_to_graph(Hashed(), (ids, y), input_ranges={"idz": (0, 1)})
        except TypeError as e:
            out["bad"] = str(e)
        print(json.dumps(out))
        """))
    assert got["ids"] == [True, 0, 9999] and got["y"][0] is False, got
    assert "idz" in got["bad"] and "ids, y" in got["bad"], got

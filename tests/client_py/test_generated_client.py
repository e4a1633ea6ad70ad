"""mapd driven by Python stubs generated here from proto/ (protoc + Debian's grpc_python_plugin):
list and submit jobs, plan a model, auth refused without the token, and a graceful exit on SIGTERM."""
import os
import signal
import subprocess
import sys
import time

import pytest

MAPD = os.environ.get("MAPD", "")
SOURCE_DIR = os.environ.get("MAPD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TOKEN = "python-client-token"


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    out = tmp_path_factory.mktemp("stubs")
    proto = os.path.join(SOURCE_DIR, "proto")
    subprocess.run(["protoc", f"-I{proto}", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "mapd/v1/graph.proto", "mapd/v1/training.proto", "mapd/v1/jobs.proto", "mapd/v1/job_service.proto", "mapd/v1/plan.proto",
                    "mapd/v1/planner_service.proto"],
                   check=True, cwd=proto, capture_output=True)
    sys.path.insert(0, str(out))
    from mapd.v1 import job_service_pb2_grpc, jobs_pb2  # noqa: E402
    return jobs_pb2, job_service_pb2_grpc


@pytest.fixture()
def mapd(tmp_path):
    assert MAPD and os.path.exists(MAPD), "set MAPD to the mapd binary (ctest does)"
    proc = subprocess.Popen([MAPD, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--store", str(tmp_path / "jobs.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MAPD_TOKEN=TOKEN))
    line = proc.stdout.readline()
    assert "serving on port" in line, line + proc.stderr.read()
    port = int(line.split("serving on port ")[1].split()[0])
    yield proc, port
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_python_stubs_list_and_submit(stubs, mapd):
    import grpc
    jobs_pb2, service = stubs
    proc, port = mapd
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = service.JobServiceStub(channel)
    auth = [("authorization", f"Bearer {TOKEN}")]
    spec = jobs_pb2.JobSpec(model="gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4", ranks=2)
    spec.training.steps = 5
    job = stub.Submit(jobs_pb2.SubmitJobRequest(spec=spec), metadata=auth, timeout=10)
    assert job.id == 1 and job.state == jobs_pb2.PENDING and job.spec.training.optimizer == "adamw"
    listed = stub.List(jobs_pb2.ListJobsRequest(), metadata=auth, timeout=10)
    assert [j.id for j in listed.jobs] == [1]
    with pytest.raises(grpc.RpcError) as err:
        stub.List(jobs_pb2.ListJobsRequest(), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as err:
        bad = jobs_pb2.JobSpec(model="gpt2", ranks=1)
        bad.training.steps = -1
        stub.Submit(jobs_pb2.SubmitJobRequest(spec=bad), metadata=auth, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "steps is -1" in err.value.details()
    # SIGTERM: a graceful exit.
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert time.monotonic() - start < 20
    assert "shutting down" in proc.stdout.read()


def test_python_stubs_plan_a_model(stubs, mapd):
    import grpc
    jobs_pb2, _ = stubs
    from mapd.v1 import planner_service_pb2, planner_service_pb2_grpc  # noqa: E402
    _, port = mapd
    stub = planner_service_pb2_grpc.PlannerServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    auth = [("authorization", f"Bearer {TOKEN}")]
    spec = jobs_pb2.JobSpec(model="gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4", ranks=4, device_type="cpu")
    planned = stub.Plan(planner_service_pb2.PlanRequest(spec=spec), metadata=auth, timeout=30)
    assert planned.fits and planned.summary.startswith("mesh ") and len(planned.plan.nodes) == len(planned.plan.graph.nodes)
    profiled = stub.Profile(planner_service_pb2.ProfileRequest(spec=spec), metadata=auth, timeout=30)
    assert profiled.parameters > 0 and profiled.predicted_peak_bytes > 0


def test_without_a_token_mapd_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MAPD_TOKEN"}
    r = subprocess.run([MAPD, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 1 and "no token" in r.stderr and "[FAILED_PRECONDITION]" in r.stderr, r.stderr


def test_settings_from_a_yaml_file(stubs, tmp_path):
    import grpc
    jobs_pb2, service = stubs
    (tmp_path / "token").write_text("from-a-file\n")
    (tmp_path / "mapd.yaml").write_text(f"listen: 127.0.0.1:0\nstore: {tmp_path / 'jobs.db'}\ntoken_file: {tmp_path / 'token'}\n"
                                        "lease_seconds: 9\nmetrics_listen: 127.0.0.1:0\n")
    env = {k: v for k, v in os.environ.items() if k != "MAPD_TOKEN"}
    proc = subprocess.Popen([MAPD, "--config", str(tmp_path / "mapd.yaml")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert "serving on port" in line and str(tmp_path / "jobs.db") in line, line + proc.stderr.read()
        port = int(line.split("serving on port ")[1].split()[0])
        stub = service.JobServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        stub.List(jobs_pb2.ListJobsRequest(), metadata=[("authorization", "Bearer from-a-file")], timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    (tmp_path / "bad.yaml").write_text("listen: 127.0.0.1:0\nlisten_port: 3\n")
    r = subprocess.run([MAPD, "--config", str(tmp_path / "bad.yaml")], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, MAPD_TOKEN="t"))
    assert r.returncode == 1 and "unknown setting 'listen_port'" in r.stderr, r.stderr

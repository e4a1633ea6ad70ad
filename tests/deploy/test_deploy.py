"""deploy/ is checked against what MAP really serves and accepts: the Prometheus configurations
pass promtool, every metric the Grafana dashboard queries is one mapd or mapd-worker serves, and
every flag the Kubernetes manifests give a binary is one its --help lists."""
import json
import os
import pathlib
import re
import signal
import subprocess
import urllib.request

import yaml

SOURCE = pathlib.Path(os.environ.get("MAPD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
DEPLOY = SOURCE / "deploy"
BINARIES = {"mapd": os.environ.get("MAPD", ""), "mapd-worker": os.environ.get("MAPD_WORKER", ""),
            "mapctl": os.environ.get("MAPCTL", "")}
TOKEN = "deploy-test-token"


def promtool_config(path):
    r = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_prometheus_configs_pass_promtool(tmp_path):
    promtool_config(DEPLOY / "prometheus" / "prometheus.yml")
    config_map = yaml.safe_load((DEPLOY / "k8s" / "prometheus.yaml").read_text())
    embedded = tmp_path / "prometheus.yml"
    embedded.write_text(config_map["data"]["prometheus.yml"])
    promtool_config(embedded)


def served_families(tmp_path):
    """The metric families a running mapd and mapd-worker declare (from their # TYPE lines)."""
    env = dict(os.environ, MAPD_TOKEN=TOKEN, MAPD_WORKER_TOKEN=TOKEN + "-workers")
    mapd = subprocess.Popen([BINARIES["mapd"], "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    worker = None
    try:
        port = int(mapd.stdout.readline().split("serving on port ")[1].split()[0])
        coordinator_metrics = mapd.stdout.readline().split("metrics on ")[1].strip()
        worker = subprocess.Popen([BINARIES["mapd-worker"], "--coordinator", f"127.0.0.1:{port}", "--cpu-devices", "1",
                                   "--metrics-listen", "127.0.0.1:0", "--work-dir", str(tmp_path)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        worker_metrics = worker.stdout.readline().split("metrics on ")[1].strip()
        families = set()
        for url in (coordinator_metrics, worker_metrics):
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            families |= {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
        return families
    finally:
        for p in (worker, mapd):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=20)


def test_every_metric_the_dashboard_queries_is_served(tmp_path):
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "mapd.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    used = set()
    for e in exprs:
        for name in re.findall(r"\bmapd_[a-z_]+", e):
            used.add(re.sub(r"_(bucket|sum|count)$", "", name))
    assert len(used) >= 15, used
    families = served_families(tmp_path)
    assert used <= families, sorted(used - families)
    # Our label is job_id: `job` is Prometheus's own (the scrape job) and would be renamed.
    assert not any(re.search(r"\bjob\s*=", e) for e in exprs), exprs
    for path in (DEPLOY / "grafana" / "provisioning").rglob("*.yaml"):
        assert yaml.safe_load(path.read_text())["apiVersion"] == 1, path


def help_flags(binary):
    out = subprocess.run([BINARIES[binary], "--help"], capture_output=True, text=True, env=dict(os.environ, MAPD_TOKEN=TOKEN))
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout))


def test_the_kubernetes_manifests_use_flags_the_binaries_have():
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {("Deployment", "mapd"), ("Deployment", "mapd-worker"), ("Service", "mapd"), ("Service", "mapd-worker"),
            ("ConfigMap", "mapd-prometheus")} <= kinds, kinds
    checkpoint_mounts = {}
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            binary, *args = c["command"]
            assert binary in BINARIES, binary
            known = help_flags(binary)
            for arg in args:
                flag = arg.split("=")[0]
                assert flag in known, f"{d['metadata']['name']}: {binary} has no {flag}"
            mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            checkpoint_mounts[binary] = mounts.get("checkpoints")
            if binary == "mapd":
                assert f"--checkpoint-dir={mounts['checkpoints']}" in args, args
            if binary == "mapd-worker":
                assert any(a.startswith("--coordinator=mapd.mapd.svc:") for a in args), args
                # Other pods' ranks reach this one's (rank 0's rendezvous store, Gloo) at its pod IP.
                assert "--advertise-host=$(POD_IP)" in args, args
                env = {e["name"]: e for e in c.get("env", [])}
                assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", env
    # The workers see the checkpoints where the coordinator does.
    assert checkpoint_mounts["mapd"] == checkpoint_mounts["mapd-worker"] is not None, checkpoint_mounts

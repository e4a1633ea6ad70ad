"""deploy/ is checked against what MAP really serves and accepts: the Prometheus configurations
pass promtool, every metric the Grafana dashboard queries is one mapd or mapd-worker serves, and
every flag the Kubernetes manifests give a binary is one its --help lists. (test_deploy_schemas.py
checks deploy/ against schemas, offline.)"""
import json
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.request

import yaml

import grafana_dashboard_check

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
    """The metric families an idle mapd and mapd-worker serve, name -> type (their # TYPE lines)."""
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
        families = {}
        for url in (coordinator_metrics, worker_metrics):
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            families.update({line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")})
        return families
    finally:
        for p in (worker, mapd):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=20)


def test_every_metric_the_dashboard_queries_is_served(tmp_path):
    """Panels' targets, query variables and annotations (grafana_dashboard_check.py collects them;
    test_deploy_schemas.py checks the dashboard's structure)."""
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "mapd.json").read_text())
    exprs = grafana_dashboard_check.queried_expressions(dashboard)
    used = grafana_dashboard_check.queried_metrics(dashboard)
    assert len(used) >= 15, used
    families = served_families(tmp_path)
    assert used <= families.keys(), sorted(used - families.keys())
    # Our label is job_id: `job` is Prometheus's own (the scrape job) and would be renamed.
    assert not any(re.search(r"\bjob\s*=", e) for e in exprs), exprs
    for path in (DEPLOY / "grafana" / "provisioning").rglob("*.yaml"):
        assert yaml.safe_load(path.read_text())["apiVersion"] == 1, path


def documented_metrics(markdown):
    """name -> (type, unit) from the tables of docs/coordinator.md's Metrics section: rows whose
    first cell names metrics in backticks (labels in braces left out)."""
    section = markdown.split("\n## Metrics\n")[1].split("\n## ")[0]
    documented = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`mapd_"):
            continue
        for name in re.findall(r"`(mapd_[a-z_]+)", cells[0]):
            documented[name] = (cells[1], cells[2])
    return documented


def test_the_docs_list_every_served_metric_with_its_type(tmp_path):
    documented = documented_metrics((SOURCE / "docs" / "coordinator.md").read_text())
    served = served_families(tmp_path)
    assert len(served) >= 25, served
    missing = sorted(set(served) - documented.keys())
    assert not missing, f"served but not in docs/coordinator.md's Metrics tables: {missing}"
    stale = sorted(documented.keys() - set(served))
    assert not stale, f"in docs/coordinator.md's Metrics tables but not served: {stale}"
    wrong = {n: (documented[n][0], t) for n, t in served.items() if documented[n][0] != t}
    assert not wrong, f"documented type vs served: {wrong}"
    assert all(unit for _, unit in documented.values()), documented
    # The rules the names follow: a unit suffix where there is one.
    for name, (kind, unit) in documented.items():
        assert (kind == "counter") == name.endswith("_total"), name
        if unit == "seconds":
            assert name.endswith("_seconds") or name.endswith("_seconds_total"), name
        if unit == "bytes":
            assert name.endswith("_bytes") or name.endswith("_bytes_total"), name
        if unit.startswith("ratio"):
            assert name.endswith("_ratio"), name


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


def test_the_manifests_are_hardened():
    """Issue 18: non-root, no privilege, limits, probes, TLS, pinned images, NetworkPolicies."""
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\d+)", dockerfile, re.M)
    assert users and users[-1] != "0", "the image runs as a user of its own"
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        name = d["metadata"]["name"]
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert str(pod["securityContext"]["runAsUser"]) == users[-1], name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod.get("automountServiceAccountToken") is False, name
        for c in pod["containers"]:
            assert not c["image"].endswith(":latest") and ":" in c["image"], f"{name}: pin the image tag, not {c['image']}"
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert "memory" in c["resources"]["limits"], f"{name}: a memory limit"
            assert "livenessProbe" in c, f"{name}: a liveness probe"
            args = c["command"][1:]
            # Tokens come from mounted secrets, never the command line.
            assert not any(a.startswith("--token=") for a in args), name
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{name}: a writable /tmp under a read-only root"
            if c["command"][0] == "mapd":
                assert "--tls-cert=/etc/mapd-tls/tls.crt" in args and "--tls-key=/etc/mapd-tls/tls.key" in args, args
            if c["command"][0] == "mapd-worker":
                assert "--tls-ca=/etc/mapd-tls/ca.crt" in args, args
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    assert policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}, policies
    mapd_ports = [p["port"] for rule in policies["mapd"]["ingress"] for p in rule.get("ports", [])]
    assert 7070 in mapd_ports, mapd_ports
    # Issue 50: ranks rendezvous (through the store's gate) and talk Gloo worker to worker on the
    # pod's ephemeral ports; the policy opens exactly the range workers.yaml sets them to and
    # mapd-worker --rank-ports checks, from workers only — no rule opens every port.
    worker_rules = policies["mapd-worker"]["ingress"]
    assert all("ports" in r for r in worker_rules), worker_rules
    from_workers = [r for r in worker_rules if r.get("from") == [{"podSelector": {"matchLabels": {"app": "mapd-worker"}}}]]
    assert len(from_workers) == 1 and len(from_workers[0]["ports"]) == 1, worker_rules
    opened = from_workers[0]["ports"][0]
    workers = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "mapd-worker")["spec"]["template"]["spec"]
    sysctls = {x["name"]: x["value"] for x in workers["securityContext"]["sysctls"]}
    low, high = (int(v) for v in sysctls["net.ipv4.ip_local_port_range"].split())
    assert (opened["port"], opened["endPort"], opened["protocol"]) == (low, high, "TCP"), (opened, sysctls)
    assert f"--rank-ports={low}-{high}" in workers["containers"][0]["command"], workers["containers"][0]["command"]


def test_tls_as_the_manifests_set_it_up(tmp_path):
    """deploy/README.md's certificate commands, mapd with --tls-cert/--tls-key, a worker and mapctl
    checking it with --tls-ca (as k8s/mapd.yaml and k8s/workers.yaml do); plaintext is refused."""
    def openssl(*args):
        r = subprocess.run(["openssl", *args], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=mapd-ca",
            "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=mapd.mapd.svc", "-keyout", "tls.key", "-out", "tls.csr")
    (tmp_path / "san.ext").write_text("subjectAltName=DNS:mapd.mapd.svc,DNS:mapd.mapd.svc.cluster.local,DNS:localhost\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-out", "tls.crt", "-extfile", "san.ext")
    env = dict(os.environ, MAPD_TOKEN=TOKEN, MAPD_WORKER_TOKEN=TOKEN + "-workers")
    mapd = subprocess.Popen([BINARIES["mapd"], "--listen", "127.0.0.1:0", "--metrics-listen", "",
                             "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    worker = None
    try:
        port = int(mapd.stdout.readline().split("serving on port ")[1].split()[0])
        worker = subprocess.Popen([BINARIES["mapd-worker"], "--coordinator", f"localhost:{port}",
                                   "--tls-ca", str(tmp_path / "ca.crt"), "--cpu-devices", "1", "--metrics-listen", "",
                                   "--work-dir", str(tmp_path / "work")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        mapctl = [BINARIES["mapctl"], "workers", "--address", f"localhost:{port}", "--token", TOKEN]
        listed = ""
        for _ in range(50):
            r = subprocess.run(mapctl + ["--tls-ca", str(tmp_path / "ca.crt")], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            listed = r.stdout
            if "ALIVE" in listed:
                break
            time.sleep(0.2)
        assert "ALIVE" in listed, listed  # the worker registered over TLS, and mapctl listed it over TLS
        plain = subprocess.run(mapctl, capture_output=True, text=True, timeout=60)
        assert plain.returncode != 0, plain.stdout
    finally:
        for p in (worker, mapd):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=20)

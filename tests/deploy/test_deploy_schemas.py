"""deploy/ checked offline against schemas and rules, and each checker shown to catch what it is for:

  * the Grafana dashboard against our structural check, modelled on Grafana's dashboard schema
    (grafana_dashboard_check.py: Debian has no Grafana nor its schema), with the project's rules
    (the `datasource` variable, $__rate_interval, units, annotations);
  * the Kubernetes manifests against the Kubernetes API's schemas, as python3-kubernetes' models
    carry them (k8s_schema.py), and the PodMonitors against a minimal check of their CRD;
  * deploy/Dockerfile's stages and the top-level .dockerignore (no Docker here to build them).

Each checker also meets deliberately broken copies and must fail on every one."""
import copy
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

import grafana_dashboard_check as dashboard_check
import k8s_schema

SOURCE = pathlib.Path(os.environ.get("MAPD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
DEPLOY = SOURCE / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "mapd.json"
BINARIES = {"mapctl": os.environ.get("MAPCTL", ""), "mapd": os.environ.get("MAPD", ""),
            "mapd-worker": os.environ.get("MAPD_WORKER", ""), "mapd-rank": os.environ.get("MAPD_RANK", ""),
            "mapctl-torch": os.environ.get("MAPCTL_TORCH", "")}


def dashboard():
    return json.loads(DASHBOARD.read_text())


# --- Grafana --------------------------------------------------------------------------------------

def test_the_dashboard_passes_our_structural_check():
    d = dashboard()
    assert dashboard_check.check_dashboard(d) == []
    # The data source is an input on import and a variable everywhere else: no uid is named.
    assert [i["pluginId"] for i in d["__inputs"] if i["type"] == "datasource"] == ["prometheus"]
    assert "mapd-prometheus" not in DASHBOARD.read_text()
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("job_id", "worker", "rank"):
        assert re.fullmatch(rf"label_values\(mapd_worker_step(\{{.*\}})?, {name}\)", variables[name]["definition"]), name
    # Rank panels follow all three variables.
    step = next(p for p in d["panels"] if p["title"] == "Step")
    assert all(f'{v}=~"${v}"' in step["targets"][0]["expr"] for v in ("job_id", "worker", "rank")), step
    # Job state changes and lost workers are annotations.
    annotated = " ".join(a["expr"] for a in d["annotations"]["list"])
    for state in ("FAILED", "SUCCEEDED", "CANCELLED", "RESTARTING"):
        assert f'mapd_jobs{{state="{state}"}}' in annotated, state
    assert 'mapd_workers{state="LOST"}' in annotated
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in d["panels"]}
    assert units["Step time: measured (p50, p95) and predicted"] == "s"
    assert units["Memory: measured peak and live, predicted peak"] == "bytes"
    assert units["Model FLOPs utilisation"] == "percentunit"
    assert units["Loss: training and evaluation"] == "none"
    assert units["Throughput"] in dashboard_check.RATE_UNITS


def test_the_checker_runs_from_the_command_line(tmp_path):
    ok = subprocess.run(["/usr/bin/python3", str(pathlib.Path(__file__).parent / "grafana_dashboard_check.py"), str(DASHBOARD)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip().endswith(": ok"), ok.stdout + ok.stderr
    broken = dashboard()
    del broken["panels"][0]["gridPos"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    bad = subprocess.run(["/usr/bin/python3", str(pathlib.Path(__file__).parent / "grafana_dashboard_check.py"),
                          str(tmp_path / "broken.json")], capture_output=True, text=True)
    assert bad.returncode == 1 and "gridPos" in bad.stdout, bad.stdout


def _panel(d, title):
    return next(p for p in d["panels"] if p["title"] == title)


def _set_time_unit_on_memory(d):
    _panel(d, "Memory: measured peak and live, predicted peak")["fieldConfig"]["defaults"]["unit"] = "s"


def _overlap(d):
    d["panels"][1]["gridPos"] = dict(d["panels"][0]["gridPos"])


def _refer_to_input(d):
    d["panels"][0]["datasource"] = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


BROKEN_DASHBOARDS = {
    "panel without gridPos": (lambda d: d["panels"][0].pop("gridPos"), "`gridPos` is required"),
    "panel with a hard-coded datasource uid": (
        lambda d: d["panels"][2].update(datasource={"type": "prometheus", "uid": "mapd-prometheus"}), "hard-coded"),
    "target with a hard-coded datasource uid": (
        lambda d: d["panels"][2]["targets"][0].update(datasource={"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}),
        "hard-coded"),
    "variable with a hard-coded datasource uid": (
        lambda d: d["templating"]["list"][1].update(datasource={"type": "prometheus", "uid": "mapd-prometheus"}), "hard-coded"),
    "a [1m] window": (
        lambda d: _panel(d, "Throughput")["targets"][0].update(
            expr='sum by (job_id) (rate(mapd_worker_tokens_total{job_id=~"$job_id"}[1m]))'), "range [1m]"),
    "a [5m] window in an annotation": (
        lambda d: d["annotations"]["list"][0].update(expr='delta(mapd_jobs{state="FAILED"}[5m]) > 0'), "range [5m]"),
    "an unknown unit": (lambda d: d["panels"][0]["fieldConfig"]["defaults"].update(unit="tokens"), "not one of Grafana's unit ids"),
    "bytes drawn as seconds": (_set_time_unit_on_memory, "is in bytes"),
    "a target without refId": (lambda d: d["panels"][0]["targets"][0].pop("refId"), "`refId` is required"),
    "two targets with one refId": (lambda d: d["panels"][1]["targets"][1].update(refId="A"), "refId 'A' twice"),
    "two panels with one id": (lambda d: d["panels"][1].update(id=d["panels"][0]["id"]), "twice"),
    "overlapping panels": (_overlap, "overlaps"),
    "a gridPos wider than the grid": (lambda d: d["panels"][1]["gridPos"].update(x=12, w=13), "outside the 24-column grid"),
    "an unknown panel type": (lambda d: d["panels"][0].update(type="graf"), "type"),
    "no datasource variable": (
        lambda d: d["templating"].update(list=[v for v in d["templating"]["list"] if v["type"] != "datasource"]),
        "no `datasource` variable"),
    "no __inputs": (lambda d: d.pop("__inputs"), "`__inputs` is required"),
    "the import input referred to": (_refer_to_input, "file provisioning leaves unreplaced"),
    "no annotations": (lambda d: d.pop("annotations"), "`annotations` is required"),
    "schemaVersion a string": (lambda d: d.update(schemaVersion="38"), "schemaVersion"),
    "an unknown top-level field": (lambda d: d.update(pannels=[]), "unknown top-level field `pannels`"),
}


@pytest.mark.parametrize("what", sorted(BROKEN_DASHBOARDS))
def test_the_dashboard_check_fails_on_a_broken_copy(what):
    break_it, expected = BROKEN_DASHBOARDS[what]
    broken = copy.deepcopy(dashboard())
    break_it(broken)
    errors = dashboard_check.check_dashboard(broken)
    assert any(expected in e for e in errors), (what, errors)


def test_grafana_provisioning_still_loads_the_dashboard():
    """The provisioned data source may keep its uid (the dashboard does not name it); it is the
    default Prometheus, which the dashboard's `datasource` variable starts on, and the provider
    loads the dashboards' folder."""
    sources = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "mapd.yaml").read_text())
    prometheus = [s for s in sources["datasources"] if s["type"] == "prometheus"]
    assert len(prometheus) == 1 and prometheus[0]["isDefault"] is True, sources
    providers = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "mapd.yaml").read_text())
    assert providers["providers"][0]["type"] == "file" and providers["providers"][0]["options"]["path"], providers
    d = dashboard()
    current = next(v for v in d["templating"]["list"] if v["name"] == "datasource").get("current")
    assert not current, f"the datasource variable must start on the default data source, not {current}"


# --- Kubernetes -----------------------------------------------------------------------------------

def manifests():
    return {path.name: path.read_text() for path in sorted((DEPLOY / "k8s").glob("*.yaml"))}


def test_the_manifests_pass_the_kubernetes_schemas():
    kinds = set()
    for name, text in manifests().items():
        assert k8s_schema.validate_text(text, name) == [], name
        kinds |= {(d["kind"], d["metadata"]["name"]) for d in k8s_schema.load_documents(text)}
    assert {("Namespace", "mapd"), ("PersistentVolumeClaim", "mapd-store"), ("Deployment", "mapd"), ("Service", "mapd"),
            ("Deployment", "mapd-worker"), ("Service", "mapd-worker"), ("ConfigMap", "mapd-prometheus"),
            ("NetworkPolicy", "default-deny-ingress"), ("PodMonitor", "mapd"), ("PodMonitor", "mapd-worker")} <= kinds, kinds


def test_the_validator_runs_from_the_command_line():
    paths = [str(p) for p in sorted((DEPLOY / "k8s").glob("*.yaml"))]
    r = subprocess.run(["/usr/bin/python3", str(pathlib.Path(__file__).parent / "k8s_schema.py"), *paths],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def _doc(kind, name=None):
    for text in manifests().values():
        for d in k8s_schema.load_documents(text):
            if d["kind"] == kind and (name is None or d["metadata"]["name"] == name):
                return copy.deepcopy(d)
    raise AssertionError(f"no {kind} {name}")


def _container(d):
    return d["spec"]["template"]["spec"]["containers"][0]


# For every kind in deploy/k8s: (how to break a copy, the path the error must name).
BROKEN_MANIFESTS = {
    ("Deployment", "unknown field"): (lambda d: _container(d)["livenessProbe"]["httpGet"].update(prot=9464),
                                      "spec.template.spec.containers[0].livenessProbe.httpGet.prot: unknown field"),
    ("Deployment", "wrong type"): (lambda d: _container(d)["ports"][0].update(containerPort="7070"),
                                   "spec.template.spec.containers[0].ports[0].containerPort: expected an integer"),
    ("Deployment", "missing required field"): (lambda d: _container(d).pop("name"),
                                               "spec.template.spec.containers[0].name: required field missing"),
    ("Deployment", "missing required spec field"): (lambda d: d["spec"].pop("selector"),
                                                    "spec.selector: required field missing"),
    ("Deployment", "a field of a later Kubernetes"): (lambda d: _container(d).update(readinessProbe={"grpc": {"port": 7070}}),
                                                      "readinessProbe.grpc: unknown field"),
    ("Deployment", "a string where a bool goes"): (
        lambda d: _container(d)["securityContext"].update(readOnlyRootFilesystem="true"),
        "securityContext.readOnlyRootFilesystem: expected true or false"),
    ("Service", "unknown field"): (lambda d: d["spec"]["ports"][0].update(targetport=7070), "spec.ports[0].targetport: unknown field"),
    ("Service", "wrong type"): (lambda d: d["spec"]["ports"][0].update(port="7070"), "spec.ports[0].port: expected an integer"),
    ("Service", "missing required field"): (lambda d: d["spec"]["ports"][0].pop("port"),
                                            "spec.ports[0].port: required field missing"),
    ("PersistentVolumeClaim", "unknown field"): (lambda d: d["spec"].update(accessMode="ReadWriteOnce"),
                                                 "spec.accessMode: unknown field"),
    ("PersistentVolumeClaim", "wrong type"): (lambda d: d["spec"].update(accessModes="ReadWriteOnce"),
                                              "spec.accessModes: expected a list"),
    ("PersistentVolumeClaim", "missing required field"): (
        lambda d: d["spec"].update(selector={"matchExpressions": [{"operator": "Exists"}]}),
        "spec.selector.matchExpressions[0].key: required field missing"),
    ("Namespace", "unknown field"): (lambda d: d.update(spec={"finalizer": ["kubernetes"]}), "spec.finalizer: unknown field"),
    ("Namespace", "wrong type"): (lambda d: d.update(spec={"finalizers": "kubernetes"}), "spec.finalizers: expected a list"),
    ("Namespace", "missing required field"): (lambda d: d["metadata"].pop("name"), "metadata.name is required"),
    ("ConfigMap", "unknown field"): (lambda d: d.update(dat=d["data"]), "dat: unknown field"),
    ("ConfigMap", "wrong type"): (lambda d: d["data"].update(interval=5), "data.interval: expected a string"),
    ("ConfigMap", "missing required field"): (lambda d: d["metadata"].pop("name"), "metadata.name is required"),
    ("NetworkPolicy", "unknown field"): (lambda d: d["spec"].update(podSelectors={}), "spec.podSelectors: unknown field"),
    ("NetworkPolicy", "wrong type"): (lambda d: d["spec"].update(policyTypes="Ingress"), "spec.policyTypes: expected a list"),
    ("NetworkPolicy", "missing required field"): (lambda d: d["spec"].pop("podSelector"),
                                                  "spec.podSelector: required field missing"),
    ("PodMonitor", "unknown field"): (lambda d: d["spec"].update(podMetricEndpoints=d["spec"]["podMetricsEndpoints"]),
                                      "spec.podMetricEndpoints: unknown field"),
    ("PodMonitor", "wrong type"): (lambda d: d["spec"]["podMetricsEndpoints"][0].update(port=9464),
                                   "spec.podMetricsEndpoints[0].port: expected a string"),
    ("PodMonitor", "missing required field"): (lambda d: d["spec"].pop("selector"), "spec.selector: required"),
    ("PodMonitor", "a bad selector"): (lambda d: d["spec"]["selector"].update(matchLabel={"app": "mapd"}),
                                       "spec.selector.matchLabel: unknown field"),
}


@pytest.mark.parametrize("kind,what", sorted(BROKEN_MANIFESTS))
def test_the_validator_fails_on_a_broken_copy(kind, what):
    break_it, expected = BROKEN_MANIFESTS[(kind, what)]
    doc = _doc(kind)
    assert k8s_schema.validate(doc, "copy") == []
    break_it(doc)
    errors = k8s_schema.validate(doc, "copy")
    assert any(expected in e for e in errors), (kind, what, errors)


def test_every_kind_in_the_manifests_meets_broken_copies():
    kinds = {d["kind"] for text in manifests().values() for d in k8s_schema.load_documents(text)}
    for kind in kinds:
        whats = {w for k, w in BROKEN_MANIFESTS if k == kind}
        assert {"unknown field", "wrong type", "missing required field"} <= whats, kind


def test_the_validator_refuses_duplicate_keys_and_unknown_kinds():
    text = (DEPLOY / "k8s" / "mapd.yaml").read_text().replace("  replicas: 1\n", "  replicas: 1\n  replicas: 2\n", 1)
    assert any("duplicate key 'replicas'" in e for e in k8s_schema.validate_text(text, "mapd.yaml"))
    deployment = _doc("Deployment", "mapd")
    deployment["apiVersion"] = "extensions/v1beta1"  # gone since Kubernetes 1.16
    assert any("no kind Deployment in extensions/v1beta1" in e for e in k8s_schema.validate(deployment))
    deployment["apiVersion"] = "v1"
    assert any("no kind Deployment in v1" in e for e in k8s_schema.validate(deployment))


def test_the_manifests_probe_scrape_and_limit_every_container():
    """Probes on ports the container declares (the gRPC port and /metrics for mapd, /metrics for
    workers), requests and limits of CPU and memory, prometheus.io annotations and a PodMonitor
    naming each Deployment's metrics port, and writable paths on emptyDir volumes."""
    docs = [d for text in manifests().values() for d in k8s_schema.load_documents(text)]
    monitors = [d for d in docs if d["kind"] == "PodMonitor"]
    for d in (d for d in docs if d["kind"] == "Deployment"):
        name = d["metadata"]["name"]
        template = d["spec"]["template"]
        labels = template["metadata"]["labels"]
        assert d["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
        for c in template["spec"]["containers"]:
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            for probe in ("readinessProbe", "livenessProbe"):
                assert probe in c, f"{name}: {probe}"
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if probe not in c:
                    continue
                handler = c[probe].get("httpGet") or c[probe].get("tcpSocket")
                assert handler, f"{name}: {probe} is an HTTP or TCP probe"
                assert handler["port"] in ports or handler["port"] in ports.values(), f"{name}: {probe} on {handler['port']}"
                if "httpGet" in c[probe]:
                    assert c[probe]["httpGet"]["path"] == "/metrics" and handler["port"] in ("metrics", ports["metrics"])
            if c["command"][0] == "mapd":
                probed = {p: c[p].get("httpGet", c[p].get("tcpSocket"))["port"] for p in ("readinessProbe", "livenessProbe")}
                assert "grpc" in probed.values() and "metrics" in probed.values(), probed
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= c["resources"][kind].keys(), f"{name}: {kind}"
            annotations = template["metadata"]["annotations"]
            assert annotations["prometheus.io/scrape"] == "true", name
            assert annotations["prometheus.io/port"] == str(ports["metrics"]) and annotations["prometheus.io/path"] == "/metrics"
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            volumes = {v["name"]: v for v in template["spec"]["volumes"]}
            for m in c["volumeMounts"]:
                if m["mountPath"] in ("/tmp", "/work"):
                    assert "emptyDir" in volumes[m["name"]], f"{name}: {m['mountPath']} on an emptyDir"
        monitor = [m for m in monitors if m["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        assert len(monitor) == 1, f"{name}: one PodMonitor selects its pods"
        assert [e["port"] for e in monitor[0]["spec"]["podMetricsEndpoints"]] == ["metrics"], monitor
        assert monitor[0]["metadata"]["namespace"] == d["metadata"]["namespace"]
    for s in (d for d in docs if d["kind"] == "Service"):
        pods = [d for d in docs if d["kind"] == "Deployment"
                and s["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert len(pods) == 1, s["metadata"]["name"]
        declared = {p["containerPort"] for c in pods[0]["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {p.get("targetPort", p["port"]) for p in s["spec"]["ports"]} <= declared, s["metadata"]["name"]


# --- Docker ---------------------------------------------------------------------------------------

def dockerfile_stages(text):
    """The Dockerfile as stages: [{"from": image, "name": alias, "instructions": [(KEYWORD, args)]}]."""
    joined = re.sub(r"\\\n", " ", text)
    stages = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.I)
            assert m, line
            stages.append({"from": m.group(1), "name": m.group(2), "instructions": []})
        else:
            assert stages, f"{keyword} before FROM"
            stages[-1]["instructions"].append((keyword, args.strip()))
    return stages


def apt_installed(run):
    """The packages an `apt-get install` in a RUN names."""
    packages = []
    for m in re.finditer(r"apt-get\s+install\s+(.*?)(?:&&|;|\|\||$)", run):
        packages += [w for w in m.group(1).split() if not w.startswith("-")]
    return packages


FORBIDDEN_AT_RUNTIME = re.compile(
    r"^(build-essential|gcc(-\d+)?|g\+\+(-\d+)?|clang(-\d+)?|cpp(-\d+)?|cmake|ninja-build|make|ccache|pkg-config|git|"
    r"chromium.*|protobuf-compiler.*|python3-pytest|libfuzzer.*|.*-dev)$")


def runtime_packages():
    return [p for kw, args in dockerfile_stages((DEPLOY / "Dockerfile").read_text())[-1]["instructions"]
            if kw == "RUN" for p in apt_installed(args)]


def test_the_dockerfile_builds_in_one_stage_and_runs_from_a_slim_one():
    stages = dockerfile_stages((DEPLOY / "Dockerfile").read_text())
    assert len(stages) >= 2, stages
    build, final = stages[0], stages[-1]
    assert build["name"], "the build stage is named, for COPY --from"
    build_runs = " ".join(a for k, a in build["instructions"] if k == "RUN")
    assert "scripts/install-deps.sh" in build_runs and "scripts/build.sh" in build_runs, build_runs
    assert final["from"] == "debian:bookworm-slim", final["from"]
    users = [a for k, a in final["instructions"] if k == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root"), users
    copies = [a for k, a in final["instructions"] if k == "COPY"]
    assert copies and all(a.startswith(f"--from={build['name']} ") for a in copies), copies
    runs = " ".join(a for k, a in final["instructions"] if k == "RUN")
    assert "install-deps.sh" not in runs and "build.sh" not in runs, runs
    packages = runtime_packages()
    assert packages, "the runtime stage installs its libraries"
    assert not [p for p in packages if FORBIDDEN_AT_RUNTIME.match(p)], packages
    assert "--no-install-recommends" in runs


def test_the_dockerignore_leaves_out_local_outputs():
    lines = [line.strip() for line in (SOURCE / ".dockerignore").read_text().splitlines()]
    patterns = {line.rstrip("/").lstrip("/") for line in lines if line and not line.startswith("#")}
    assert {"build", ".git"} <= patterns, patterns


def test_the_runtime_packages_are_debian_packages():
    if not shutil.which("apt-cache"):
        pytest.skip("no apt-cache here")
    packages = runtime_packages()
    out = subprocess.run(["apt-cache", "policy", "libc6", *packages], capture_output=True, text=True).stdout
    candidates = dict(re.findall(r"^(\S+):\n\s+Installed: .*\n\s+Candidate: (\S+)", out, re.M))
    if candidates.get("libc6", "(none)") == "(none)":
        pytest.skip("apt's package lists are empty here (apt-get update)")
    missing = [p for p in packages if candidates.get(p, "(none)") == "(none)"]
    assert not missing, f"not in Debian's package lists: {missing}"


def test_the_runtime_packages_hold_every_library_the_binaries_link():
    """readelf's NEEDED entries of mapctl, mapctl-torch, mapd, mapd-worker and mapd-rank, each library mapped to its package
    with dpkg -S, are all within the runtime packages and what apt installs with them (Depends,
    recursively) or the base image's C and C++ runtimes."""
    if not all(BINARIES.values()) or not all(shutil.which(t) for t in ("readelf", "ldd", "dpkg", "apt-cache")):
        pytest.skip("needs the binaries (MAPCTL, MAPCTL_TORCH, MAPD, MAPD_WORKER, MAPD_RANK), readelf, ldd, dpkg and apt-cache")
    closure = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                              "--no-breaks", "--no-replaces", "--no-enhances", *runtime_packages()],
                             capture_output=True, text=True).stdout
    provided = {line.strip() for line in closure.splitlines() if line and not line.startswith(" ")}
    if not provided:
        pytest.skip("apt's package lists are empty here (apt-get update)")
    provided |= {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:bookworm-slim
    links = []  # (binary, library, its path)
    for binary, path in BINARIES.items():
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                            subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout)
        resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", path], capture_output=True, text=True).stdout, re.M))
        for lib in needed:
            if lib.startswith("ld-linux"):
                continue
            where = resolved.get(lib)
            assert where and where != "not", f"{binary}: {lib} not found"
            if not where.startswith("/usr/local/cuda"):  # a CUDA build's NCCL: the image builds with MAPD_WITH_CUDA=off
                links.append((binary, lib, where))
    def candidates(where):
        return [os.path.realpath(where), where, where.replace("/lib/", "/usr/lib/", 1)]
    # One dpkg -S for them all (it prints "package:arch: path" for each path it knows).
    paths = sorted({c for _, _, where in links for c in candidates(where)})
    out = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True).stdout
    owners = {line.split(": ", 1)[1]: line.split(":")[0] for line in out.splitlines() if ": " in line}
    missing = {}
    for binary, lib, where in links:
        owner = next((owners[c] for c in candidates(where) if c in owners), "")
        assert owner, f"{binary}: {lib} ({where}) is in no Debian package"
        if owner not in provided:
            missing.setdefault(owner, []).append(f"{binary}: {lib}")
    assert not missing, f"the runtime stage lacks: {missing}"

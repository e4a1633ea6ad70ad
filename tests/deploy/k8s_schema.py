"""Offline schema validation of Kubernetes manifests, kubeconform-style, against the models of
Debian's python3-kubernetes (the official Python client, 22.6: Kubernetes 1.22's API).

Those models are generated from the Kubernetes OpenAPI specification: each class (V1Deployment,
V1Container, ...) carries `openapi_types` (attribute -> type: `str`, `int`, `bool`, `object` for
int-or-string, `list[V1Container]`, `dict(str, str)`, another model) and `attribute_map`
(attribute -> the manifest's JSON key), and its constructor, with client-side validation on,
raises ValueError for a required field left out. validate() walks every document of a manifest
against them, strictly:

  * a key the model does not have -> an error naming its path (a typo, or a field of a later
    Kubernetes than 1.22, such as the gRPC probe);
  * a value of the wrong type -> an error (str, int and bool are not interchangeable; YAML's
    `yes` is a bool; int-or-string fields take either);
  * a required field missing -> the model's own ValueError, at its path;
  * a key twice in one mapping -> an error (YAML keeps the last silently);
  * apiVersion/kind must be a kind the client has an API for in that group and version.

One point is stricter than the API server: resource quantities are typed `str` by the client,
so `cpu: 2` must be written `cpu: "2"` here (the server takes both).

The Prometheus Operator's PodMonitor is a custom resource, not in the Kubernetes schemas: for it
only apiVersion, kind, metadata, spec.selector (as a Kubernetes LabelSelector), spec's keys and
spec.podMetricsEndpoints (port or targetPort, path, scheme, interval) are checked — a minimal
check, not the operator's CRD schema.

Usage: /usr/bin/python3 tests/deploy/k8s_schema.py MANIFEST.yaml...   (exit 1 on errors)
"""
import re
import sys

import yaml

try:
    import kubernetes.client as k8s
except ImportError:  # reported by validate(): install python3-kubernetes (scripts/install-deps.sh)
    k8s = None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_documents(text):
    """The manifest's documents (empty ones left out); raises yaml.YAMLError, duplicate keys included."""
    return [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]


_config = None


def _configuration():
    global _config
    if _config is None:
        _config = k8s.Configuration()
        _config.client_side_validation = True
    return _config


def _model(name):
    return getattr(k8s, name, None)


def _at(path, key):
    return f"{path}.{key}" if path else str(key)


def _check_value(value, type_name, path, errors):
    if value is None:
        return  # null: the field left unset, as the API server reads it
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            _check_value(item, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a mapping, got {type(value).__name__}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                errors.append(f"{path}: key {k!r} is not a string")
            _check_value(v, m.group(1), _at(path, k), errors)
        return
    if type_name == "str" or type_name in ("datetime", "date"):
        if not isinstance(value, str):
            errors.append(f"{path}: expected a string, got {type(value).__name__} {value!r}")
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{path}: expected an integer, got {type(value).__name__} {value!r}")
        return
    if type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            errors.append(f"{path}: expected a number, got {type(value).__name__} {value!r}")
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            errors.append(f"{path}: expected true or false, got {type(value).__name__} {value!r}")
        return
    if type_name == "object":  # int-or-string (ports), or free-form (raw extensions)
        if isinstance(value, bool):
            errors.append(f"{path}: expected an integer or a string, got bool {value!r}")
        return
    cls = _model(type_name)
    if cls is None:
        errors.append(f"{path}: the client has no model {type_name}")
        return
    _check_model(value, cls, path, errors)


def _check_model(obj, cls, path, errors):
    if not isinstance(obj, dict):
        errors.append(f"{path}: expected a mapping ({cls.__name__}), got {type(obj).__name__}")
        return
    by_key = {key: attr for attr, key in cls.attribute_map.items()}
    kwargs = {}
    for key, value in obj.items():
        attr = by_key.get(key)
        if attr is None:
            errors.append(f"{_at(path, key)}: unknown field (not in {cls.__name__})")
            continue
        kwargs[attr] = value
        _check_value(value, cls.openapi_types[attr], _at(path, key), errors)
    try:
        cls(local_vars_configuration=_configuration(), **kwargs)
    except ValueError as e:  # a required field missing (or a value outside an enum)
        m = re.match(r"Invalid value for `(\w+)`, must not be `None`", str(e))
        if m and m.group(1) in cls.attribute_map:
            errors.append(f"{_at(path, cls.attribute_map[m.group(1)])}: required field missing (in {cls.__name__})")
        else:
            errors.append(f"{path or '(top level)'}: {e}")


def _snake(kind):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def _api_class(group, version):
    words = [w.capitalize() for w in group.replace(".k8s.io", "").split(".")] if group else ["Core"]
    return getattr(k8s, "".join(words) + version.capitalize() + "Api", None)


POD_MONITOR_SPEC = {"jobLabel", "podTargetLabels", "podMetricsEndpoints", "selector", "namespaceSelector",
                    "sampleLimit", "targetLimit", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
                    "attachMetadata"}
POD_METRICS_ENDPOINT = {"port", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout", "honorLabels",
                        "honorTimestamps", "relabelings", "metricRelabelings", "tlsConfig", "bearerTokenSecret",
                        "basicAuth", "authorization", "oauth2", "followRedirects", "enableHttp2", "filterRunning",
                        "proxyUrl"}
DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")


def _check_pod_monitor(doc, errors):
    """The minimal check of a monitoring.coreos.com/v1 PodMonitor (a CRD: no Kubernetes schema)."""
    for key in sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec"}):
        errors.append(f"{key}: unknown field")
    _check_model(doc.get("metadata"), k8s.V1ObjectMeta, "metadata", errors)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        errors.append("spec: required mapping")
        return
    for key in sorted(set(spec) - POD_MONITOR_SPEC):
        errors.append(f"spec.{key}: unknown field (not in this check's PodMonitor spec)")
    if "selector" not in spec:
        errors.append("spec.selector: required")
    else:
        _check_model(spec["selector"], k8s.V1LabelSelector, "spec.selector", errors)
    endpoints = spec.get("podMetricsEndpoints")
    if not isinstance(endpoints, list) or not endpoints:
        errors.append("spec.podMetricsEndpoints: required non-empty list")
        return
    for i, ep in enumerate(endpoints):
        at = f"spec.podMetricsEndpoints[{i}]"
        if not isinstance(ep, dict):
            errors.append(f"{at}: expected a mapping")
            continue
        for key in sorted(set(ep) - POD_METRICS_ENDPOINT):
            errors.append(f"{at}.{key}: unknown field")
        if "port" not in ep and "targetPort" not in ep:
            errors.append(f"{at}: needs port (a container port's name) or targetPort")
        for key in ("port", "path", "scheme", "interval", "scrapeTimeout"):
            if key in ep and not isinstance(ep[key], str):
                errors.append(f"{at}.{key}: expected a string, got {type(ep[key]).__name__}")
        if ep.get("scheme") not in (None, "http", "https"):
            errors.append(f"{at}.scheme: {ep['scheme']!r} is not http or https")
        for key in ("interval", "scrapeTimeout"):
            if isinstance(ep.get(key), str) and not DURATION.match(ep[key]):
                errors.append(f"{at}.{key}: {ep[key]!r} is not a Prometheus duration")


def validate(doc, name="manifest"):
    """Returns the document's errors (empty when it is valid)."""
    if k8s is None:
        return ["python3-kubernetes is not installed (scripts/install-deps.sh installs it)"]
    if not isinstance(doc, dict):
        return [f"{name}: a document must be a mapping"]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [f"{name}: apiVersion and kind are required strings"]
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    where = f"{name}: {kind} {meta.get('name', '?')}"
    errors = []
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        errors.append(f"{where}: metadata.name is required")
    if api_version == "monitoring.coreos.com/v1" and kind == "PodMonitor":
        found = []
        _check_pod_monitor(doc, found)
        return errors + [f"{where}: {e}" for e in found]
    group, _, version = api_version.rpartition("/")
    api = _api_class(group, version)
    if api is None or not any(hasattr(api, f"{verb}_{_snake(kind)}") for verb in ("create_namespaced", "create")):
        return errors + [f"{where}: no kind {kind} in {api_version} (Kubernetes 1.22's API)"]
    cls = _model(version.capitalize() + kind)
    if cls is None:
        return errors + [f"{where}: the client has no model for {api_version} {kind}"]
    found = []
    _check_model(doc, cls, "", found)
    return errors + [f"{where}: {e}" for e in found]


def validate_text(text, name="manifest"):
    """Every document of a multi-document YAML text; a YAML error (a duplicate key) is one error."""
    try:
        docs = load_documents(text)
    except yaml.YAMLError as e:
        return [f"{name}: {e}"]
    return [e for d in docs for e in validate(d, name)]


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    errors = []
    for path in argv[1:]:
        with open(path) as f:
            errors += validate_text(f.read(), path)
    for e in errors:
        print(e)
    print(f"{len(argv) - 1} file(s): {'ok' if not errors else f'{len(errors)} error(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

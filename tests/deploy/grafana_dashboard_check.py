"""Our structural check of a Grafana dashboard, offline.

This is not Grafana's validator: Debian packages no Grafana nor its dashboard JSON schema, and
nothing here reaches the network. It is modelled on the parts of Grafana's dashboard schema
(the `dashboard` kind: top-level fields, panels, targets, data source references, templating
and annotations) that deploy/grafana/dashboards/mapd.json uses, checks them the way the schema
types them, and adds the rules this project keeps:

  * every panel, target, query variable and annotation names the data source `${datasource}`, a
    template variable of type `datasource` over Prometheus: no hard-coded data source uid, so
    the dashboard works with whichever Prometheus it is given (`__inputs` declares the input
    for Grafana's import; nothing else refers to it, as file provisioning leaves `${DS_...}`
    unreplaced);
  * every range selector in a query is `[$__rate_interval]`;
  * every panel's unit is one of Grafana's unit ids, and the one its queries call for (seconds
    "s", bytes "bytes", ratios "percentunit", losses "none", rates a rate unit);
  * the metrics the queries name: `queried_metrics()` lists them, and tests/deploy checks them
    against what mapd and mapd-worker serve.

Usage: /usr/bin/python3 tests/deploy/grafana_dashboard_check.py DASHBOARD.json   (exit 1 on errors)
"""
import json
import re
import sys

# Top-level fields of Grafana's dashboard schema (and the export's __inputs/__requires/__elements).
TOP_LEVEL = {
    "id", "uid", "title", "description", "revision", "gnetId", "tags", "timezone", "editable", "graphTooltip", "time",
    "timepicker", "fiscalYearStartMonth", "liveNow", "weekStart", "refresh", "schemaVersion", "version", "panels",
    "templating", "annotations", "links", "snapshot", "__inputs", "__requires", "__elements",
}
# Panel types shipped with Grafana that this checker knows.
PANEL_TYPES = {"timeseries", "stat", "gauge", "bargauge", "table", "text", "row", "heatmap", "piechart",
               "state-timeline", "status-history", "barchart", "histogram", "logs", "graph"}
VARIABLE_TYPES = {"query", "datasource", "custom", "constant", "interval", "textbox", "adhoc"}
# Grafana's unit ids (its value formats, packages/grafana-data valueFormats categories) for
# counts, data, data rates, time, throughput and computation; custom units are `prefix:`,
# `suffix:`, `si:`, `count:`, `currency:` and `time:` followed by text.
UNITS = {
    # misc
    "none", "string", "short", "percent", "percentunit", "humidity", "dB", "hex0x", "hex", "sci", "locale", "pixel",
    # data (IEC and metric)
    "bits", "bytes", "kbytes", "mbytes", "gbytes", "tbytes", "pbytes",
    "decbits", "decbytes", "deckbytes", "decmbytes", "decgbytes", "dectbytes", "decpbytes",
    # data rate
    "pps", "bps", "Bps", "KBs", "Kbits", "MBs", "Mbits", "GBs", "Gbits", "TBs", "Tbits", "PBs", "Pbits",
    # time
    "hertz", "ns", "µs", "ms", "s", "m", "h", "d", "dtdurationms", "dtdurations", "dthms", "dtdhms", "timeticks",
    "clockms", "clocks",
    # date & time
    "dateTimeAsIso", "dateTimeAsIsoNoDateIfToday", "dateTimeAsUS", "dateTimeAsUSNoDateIfToday", "dateTimeFromNow",
    # throughput
    "cps", "ops", "reqps", "rps", "wps", "iops", "cpm", "opm", "rpm", "wpm",
    # computation
    "flops", "mflops", "gflops", "tflops", "pflops", "eflops", "zflops", "yflops",
    # booleans
    "bool", "bool_yes_no", "bool_on_off",
}
CUSTOM_UNIT = re.compile(r"^(prefix|suffix|si|count|currency|time):.+$")
RATE_UNITS = {"short", "cps", "ops", "reqps", "rps", "wps", "iops", "hertz"}  # per second
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RANGE = re.compile(r"\[([^\]]*)\]")
METRIC = re.compile(r"\bmapd_[a-z_]+")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _type(errors, where, obj, key, kind, required=True):
    """Checks obj[key] is of `kind` (a Python type or a predicate); returns it (or None)."""
    if key not in obj:
        if required:
            errors.append(f"{where}: `{key}` is required")
        return None
    v = obj[key]
    ok = kind(v) if callable(kind) and not isinstance(kind, type) else isinstance(v, kind) and not (
        kind is int and isinstance(v, bool))
    if not ok:
        errors.append(f"{where}.{key}: {v!r} is not {getattr(kind, '__name__', 'valid')}")
        return None
    return v


def _datasource(errors, where, obj, required=True):
    ds = obj.get("datasource")
    if ds is None and not required:
        return
    if ds != DATASOURCE:
        errors.append(f"{where}.datasource: {ds!r}: every query goes to {DATASOURCE} (the `datasource` variable), "
                      "not a hard-coded data source")


def _ranges(errors, where, expr):
    for window in RANGE.findall(expr):
        if window != "$__rate_interval":
            errors.append(f"{where}: range [{window}] in {expr!r}: use [$__rate_interval]")


def expected_units(expr):
    """The units a query's result calls for, from the metric it reads and what it does to it
    (Prometheus' naming: _seconds, _bytes, _ratio, _total), or None when it does not say."""
    names = METRIC.findall(expr)
    if not names:
        return None
    m = names[0]
    rate = re.search(r"\b(rate|irate)\s*\(", expr) is not None
    if "histogram_quantile" in expr:
        return {"s"} if m.endswith("_seconds_bucket") else ({"bytes"} if m.endswith("_bytes_bucket") else None)
    if m.endswith("_seconds_total") and rate:
        return {"percentunit"}  # seconds per second: the share of time
    if m.endswith("_bytes_total") and rate:
        return {"Bps"}
    if m.endswith("_total") and rate:
        return RATE_UNITS
    if m.endswith("_total"):
        return {"short", "none"}
    if m.endswith("_seconds"):
        return {"s"}
    if m.endswith("_bytes"):
        return {"bytes"}
    if m.endswith("_ratio"):
        return {"percentunit"}
    if "loss" in m or m.endswith("learning_rate"):
        return {"none", "sci"}
    return {"short", "none"}  # counts: jobs, workers, ranks, steps


def _unit(errors, where, unit):
    if not isinstance(unit, str) or not (unit in UNITS or CUSTOM_UNIT.match(unit)):
        errors.append(f"{where}: unit {unit!r} is not one of Grafana's unit ids")
        return False
    return True


def _grid(errors, where, grid, placed):
    if not isinstance(grid, dict):
        errors.append(f"{where}: `gridPos` is required")
        return
    for k in ("h", "w", "x", "y"):
        if not _is_int(grid.get(k)):
            errors.append(f"{where}.gridPos.{k}: {grid.get(k)!r} is not an integer")
            return
    if not (grid["h"] > 0 and 1 <= grid["w"] <= 24 and grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["y"] >= 0):
        errors.append(f"{where}.gridPos {grid}: outside the 24-column grid")
    for other, g in placed:
        if (grid["x"] < g["x"] + g["w"] and g["x"] < grid["x"] + grid["w"] and grid["y"] < g["y"] + g["h"]
                and g["y"] < grid["y"] + grid["h"]):
            errors.append(f"{where}.gridPos overlaps {other}")
    placed.append((where, grid))


def check_dashboard(d):
    """Returns the dashboard's errors (empty when it passes)."""
    errors = []
    if not isinstance(d, dict):
        return ["the dashboard is not a JSON object"]
    for key in sorted(set(d) - TOP_LEVEL):
        errors.append(f"dashboard: unknown top-level field `{key}`")
    _type(errors, "dashboard", d, "title", str)
    _type(errors, "dashboard", d, "uid", lambda v: isinstance(v, str) and 0 < len(v) <= 40 and re.fullmatch(r"[A-Za-z0-9_-]+", v))
    version = _type(errors, "dashboard", d, "schemaVersion", int)
    if version is not None and not 36 <= version <= 41:
        errors.append(f"dashboard.schemaVersion: {version}: this check knows 36 (Grafana 9) to 41")
    _type(errors, "dashboard", d, "tags", lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v), required=False)
    _type(errors, "dashboard", d, "editable", bool, required=False)
    _type(errors, "dashboard", d, "graphTooltip", lambda v: v in (0, 1, 2), required=False)
    _type(errors, "dashboard", d, "refresh", str, required=False)
    t = _type(errors, "dashboard", d, "time", dict, required=False)
    if t is not None and not (isinstance(t.get("from"), str) and isinstance(t.get("to"), str)):
        errors.append(f"dashboard.time: {t!r} needs `from` and `to` strings")

    # __inputs: the data source input Grafana's import asks for. Only the variable refers to a
    # data source; a `${DS_...}` elsewhere would stay unreplaced under file provisioning.
    inputs = _type(errors, "dashboard", d, "__inputs", list)
    if inputs is not None:
        if not any(isinstance(i, dict) and i.get("type") == "datasource" and i.get("pluginId") == "prometheus"
                   and isinstance(i.get("name"), str) for i in inputs):
            errors.append("dashboard.__inputs: no Prometheus data source input")
        rest = json.dumps({k: v for k, v in d.items() if k != "__inputs"})
        for i in inputs:
            if isinstance(i, dict) and isinstance(i.get("name"), str) and "${" + i["name"] + "}" in rest:
                errors.append(f"dashboard: refers to ${{{i['name']}}}, which file provisioning leaves unreplaced; "
                              "refer to ${datasource}")

    # Templating.
    templating = _type(errors, "dashboard", d, "templating", dict)
    variables = templating.get("list") if templating else None
    if not isinstance(variables, list):
        errors.append("dashboard.templating.list: required list")
        variables = []
    names = set()
    for i, v in enumerate(variables):
        where = f"templating.list[{i}]"
        if not isinstance(v, dict):
            errors.append(f"{where}: not an object")
            continue
        name = _type(errors, where, v, "name", lambda x: isinstance(x, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", x))
        kind = _type(errors, where, v, "type", lambda x: x in VARIABLE_TYPES)
        if name in names:
            errors.append(f"{where}: variable `{name}` twice")
        names.add(name)
        if kind == "datasource":
            if v.get("query") != "prometheus":
                errors.append(f"{where}: a data source variable over `prometheus`, not {v.get('query')!r}")
        elif kind == "query":
            _datasource(errors, where, v)
            definition = _type(errors, where, v, "definition", str)
            q = v.get("query")
            query = q.get("query") if isinstance(q, dict) else q
            if not isinstance(query, str) or (definition is not None and query != definition):
                errors.append(f"{where}.query: {q!r} is not the query of `definition`")
            if isinstance(query, str):
                _ranges(errors, where, query)
        for key in ("multi", "includeAll"):
            _type(errors, where, v, key, bool, required=False)
    if "datasource" not in names or not any(isinstance(v, dict) and v.get("name") == "datasource"
                                             and v.get("type") == "datasource" for v in variables):
        errors.append("templating: no `datasource` variable of type datasource")

    # Annotations.
    annotations = _type(errors, "dashboard", d, "annotations", dict)
    alist = annotations.get("list") if annotations else None
    if not isinstance(alist, list):
        errors.append("dashboard.annotations.list: required list")
        alist = []
    for i, a in enumerate(alist):
        where = f"annotations.list[{i}]"
        if not isinstance(a, dict):
            errors.append(f"{where}: not an object")
            continue
        _type(errors, where, a, "name", str)
        _type(errors, where, a, "enable", bool)
        _type(errors, where, a, "iconColor", str)
        if a.get("builtIn") == 1:
            continue  # Grafana's own annotations and alerts, from its "-- Grafana --" source
        _datasource(errors, where, a)
        expr = _type(errors, where, a, "expr", str)
        if expr is not None:
            _ranges(errors, where, expr)

    # Panels.
    panels = _type(errors, "dashboard", d, "panels", list)
    ids, placed = set(), []
    for i, p in enumerate(panels or []):
        where = f"panels[{i}]"
        if not isinstance(p, dict):
            errors.append(f"{where}: not an object")
            continue
        pid = _type(errors, where, p, "id", int)
        if pid is not None:
            if pid in ids:
                errors.append(f"{where}: id {pid} twice")
            ids.add(pid)
            where = f"panels[{i}] (id {pid}, {p.get('title')!r})"
        kind = _type(errors, where, p, "type", lambda x: x in PANEL_TYPES)
        _type(errors, where, p, "title", str)
        _grid(errors, where, p.get("gridPos"), placed)
        if kind == "row":
            continue
        _datasource(errors, where, p)
        targets = _type(errors, where, p, "targets", lambda x: isinstance(x, list) and len(x) > 0)
        fc = p.get("fieldConfig")
        unit = fc.get("defaults", {}).get("unit") if isinstance(fc, dict) and isinstance(fc.get("defaults"), dict) else None
        if unit is None:
            errors.append(f"{where}: no fieldConfig.defaults.unit")
        else:
            _unit(errors, where, unit)
        overrides = {}
        for o in (fc or {}).get("overrides", []) if isinstance(fc, dict) else []:
            matcher = o.get("matcher", {}) if isinstance(o, dict) else {}
            for prop in (o.get("properties", []) if isinstance(o, dict) else []):
                if isinstance(prop, dict) and prop.get("id") == "unit":
                    if _unit(errors, f"{where}.overrides", prop.get("value")) and matcher.get("id") == "byFrameRefID":
                        overrides[matcher.get("options")] = prop.get("value")
        refs = set()
        for k, tgt in enumerate(targets or []):
            tw = f"{where}.targets[{k}]"
            if not isinstance(tgt, dict):
                errors.append(f"{tw}: not an object")
                continue
            ref = _type(errors, tw, tgt, "refId", lambda x: isinstance(x, str) and x != "")
            if ref in refs:
                errors.append(f"{tw}: refId {ref!r} twice")
            refs.add(ref)
            _datasource(errors, tw, tgt)
            expr = _type(errors, tw, tgt, "expr", lambda x: isinstance(x, str) and x.strip() != "")
            if expr is None:
                continue
            _ranges(errors, tw, expr)
            want = expected_units(expr)
            have = overrides.get(ref, unit)
            if want is not None and have is not None and have not in want:
                errors.append(f"{tw}: {expr!r} is in {' or '.join(sorted(want))}, the panel's unit is {have!r}")
    return errors


def queried_expressions(d):
    """Every PromQL expression the dashboard runs: panels' targets, query variables, annotations."""
    exprs = [t["expr"] for p in d.get("panels", []) for t in p.get("targets", []) if "expr" in t]
    exprs += [v["definition"] for v in d.get("templating", {}).get("list", []) if v.get("type") == "query"]
    exprs += [a["expr"] for a in d.get("annotations", {}).get("list", []) if "expr" in a]
    return exprs


def queried_metrics(d):
    """The metric families the dashboard reads (histogram series _bucket/_sum/_count as their family)."""
    return {re.sub(r"_(bucket|sum|count)$", "", name) for e in queried_expressions(d) for name in METRIC.findall(e)}


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        errors = check_dashboard(json.load(f))
    for e in errors:
        print(f"{argv[1]}: {e}")
    print(f"{argv[1]}: {'ok' if not errors else f'{len(errors)} error(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

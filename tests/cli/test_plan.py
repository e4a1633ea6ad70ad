"""mapctl plan end to end: output, saved plans, errors, and the HTML report rendered in Chromium."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import SOURCE_DIR, run_mapctl

SMALL_GPT = "gpt2:layers=2,hidden=64,heads=4,vocab=256,seq=32,batch=8"
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def test_plan_json_has_the_documented_fields(tmp_path):
    req = tmp_path / "request.pb"
    r = json.loads(run_mapctl("plan", SMALL_GPT, "--devices", "4", "--dump-solver-request", str(req), "-o", "json",
                              check=0).stdout)
    for key in ("predicted_step_seconds", "predicted_peak_bytes", "solve_seconds", "mesh", "baselines",
                "memory_breakdown", "communication_bytes", "zero_stage", "layers", "alternatives"):
        assert key in r, key
    assert r["fits"] and r["predicted_step_seconds"] > 0 and r["solve_seconds"] > 0
    assert sum(r["memory_breakdown"].values()) == r["predicted_peak_bytes"] or \
        abs(sum(r["memory_breakdown"].values()) - r["predicted_peak_bytes"]) <= 8
    # Every (mesh shape, micro-batch count) of 4 devices and a batch of 8 was searched or pruned:
    # 4 and 2x2, times 1, 2, 4 and 8 micro-batches.
    assert r["micro_batch_counts_searched"] == [1, 2, 4, 8]
    assert r["meshes_solved"] + r["meshes_pruned"] == 2 * 4
    assert r["global_batch"] == 8 and r["micro_batches"] in (1, 2, 4, 8)
    assert r["micro_batch_size"] * r["micro_batches"] == 8
    assert r["precision"] == "bf16"  # the default on a GPU device type (h100-80g)
    cpu = json.loads(run_mapctl("plan", SMALL_GPT, "--devices", "4", "--device-type", "cpu", "-o", "json", check=0).stdout)
    assert cpu["precision"] == "fp32"
    names = [b["name"] for b in r["baselines"]]
    assert names == ["data parallel", "ZeRO-3 (FSDP)", "Megatron TP=2 x DP=2", "Megatron TP=4"]
    for b in r["baselines"]:
        assert set(("name", "predicted_step_seconds", "predicted_peak_bytes", "fits", "micro_batches", "micro_batch_size")) <= set(b)
        if b["fits"]:
            assert r["predicted_step_seconds"] <= b["predicted_step_seconds"] * (1 + 1e-9), b
    assert req.stat().st_size > 0


def test_plan_table_names_the_mesh_layers_and_baselines():
    out = run_mapctl("plan", SMALL_GPT, "--mesh", "2x2", check=0).stdout
    assert "Mesh:         2x2" in out
    assert re.search(r"Memory: .* parameters .* gradients .* optimizer states .* activations", out)
    assert "Communication per device per step: all-reduce" in out
    assert "Baselines (same cost model):" in out and "Megatron TP=2 x DP=2" in out
    # Per-layer strategies in words, repeated layers counted once.
    assert re.search(r"h\.#\.mlp\.c_fc/linear\s+linear\s+\S", out), out


def test_plan_save_writes_a_plan_protoc_can_decode(tmp_path):
    plan = tmp_path / "plan.pb"
    run_mapctl("plan", SMALL_GPT, "--devices", "2", "--save", str(plan), check=0)
    proto_dir = os.path.join(SOURCE_DIR, "proto")
    with open(plan, "rb") as f:
        text = subprocess.run(["protoc", f"-I{proto_dir}", "--decode=mapd.v1.Plan", "mapd/v1/plan.proto"], stdin=f,
                              capture_output=True, check=True, timeout=60).stdout.decode()
    assert "mesh: 2" in text
    assert 'input_placements: "S(0)"' in text or 'input_placements: "R"' in text
    assert text.count("nodes {") >= 20  # the embedded graph's nodes and the plan's


def test_plan_errors():
    r = run_mapctl("plan", SMALL_GPT, "--devices", "8", "--mesh", "2x2")
    assert r.returncode == 1 and "has 4 devices but --devices is 8" in r.stderr
    r = run_mapctl("plan", SMALL_GPT, "--devices", "4", "--memory-per-device", "0GiB")
    assert r.returncode == 1 and "positive number with a unit" in r.stderr
    r = run_mapctl("plan", SMALL_GPT, "--devices", "4", "--device-type", "tpu-v9")
    assert r.returncode == 1 and "unknown device type" in r.stderr
    r = run_mapctl("plan", SMALL_GPT, "--devices", "4", "--zero", "5")
    assert r.returncode == 1 and "--zero '5' is not auto, 0, 1, 2 or 3" in r.stderr
    r = run_mapctl("plan", SMALL_GPT)
    assert r.returncode == 1 and "--devices N or --mesh" in r.stderr


def test_plan_that_nothing_fits_says_how_much_memory_would():
    r = run_mapctl("plan", SMALL_GPT, "--devices", "4", "--memory-per-device", "1KiB")
    assert r.returncode == 1 and "no plan fits" in r.stderr and "FAILED_PRECONDITION" in r.stderr
    m = re.search(r"the least memory any plan of this model on 4 device\(s\) needs is ([0-9.]+) (B|KiB|MiB|GiB|TiB) per device", r.stderr)
    assert m, r.stderr
    least = float(m.group(1)) * UNITS[m.group(2)]
    assert least > 1024
    # Given that much (plus the rounding of the message), a plan fits.
    r = json.loads(run_mapctl("plan", SMALL_GPT, "--devices", "4", "--memory-per-device", str(int(least * 1.01)),
                              "-o", "json", check=0).stdout)
    assert r["fits"] and r["predicted_peak_bytes"] <= int(least * 1.01)


def _pixels(png, rgb, tol=12):
    """How many pixels of the screenshot are within `tol` of the colour `rgb`."""
    from PIL import Image
    img = Image.open(png).convert("RGB")
    colors = img.getcolors(maxcolors=img.width * img.height)
    return sum(n for n, c in colors if all(abs(a - b) <= tol for a, b in zip(c, rgb)))


@pytest.mark.long  # slow: the long form runs it (scripts/test.sh --long)
def test_plan_report_renders_in_headless_chromium(tmp_path):
    report = tmp_path / "plan.html"
    # A budget near the plan's peak (about 2 MiB) so that the memory bars are wide.
    run_mapctl("plan", SMALL_GPT, "--devices", "8", "--memory-per-device", "3MiB", "--report", str(report), check=0)
    html = report.read_text()
    # Self-contained: no scripts, nothing fetched (the only URL is the SVG namespace).
    assert "<script" not in html.lower()
    assert not [u for u in re.findall(r"https?://[^\"' )]+", html) if u != "http://www.w3.org/2000/svg"]
    for element in ('id="mesh"', 'id="memory"', 'id="budget"', 'id="steps"', 'id="baselines"', 'id="layers"'):
        assert element in html, element
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (scripts/install-deps.sh installs it)"
    png = tmp_path / "plan.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", "--window-size=1200,2400", f"--screenshot={png}", report.as_uri()],
                   capture_output=True, timeout=120, check=True, cwd=tmp_path)
    assert png.stat().st_size > 10000
    # Look at what was drawn: the 8 device cells of the mesh, the budget line, the plan's bar.
    assert _pixels(png, (0x4e, 0x79, 0xa7)) > 8 * 20 * 20, "mesh cells / parameter bars missing"
    assert _pixels(png, (0xdd, 0x00, 0x00), tol=30) > 50, "budget line missing"
    assert _pixels(png, (0x59, 0xa1, 0x4f)) > 200, "the plan's step-time bar missing"
    # Memory bars: gradients (orange) and optimizer states (red) of the plan and the baselines.
    assert _pixels(png, (0xf2, 0x8e, 0x2b)) > 6 * 20 * 10, "gradient bars missing"
    assert _pixels(png, (0xe1, 0x57, 0x59)) > 6 * 20 * 20, "optimizer-state bars missing"
    _assert_no_label_clipped(chromium, report, tmp_path)
    # Long baseline names ("Megatron TP=2 x DP=4 + full recompute": the baselines that fit only with
    # every layer recomputed), at 1400 px: every name drawn whole, left of the bars.
    long_names = tmp_path / "long-names.html"
    r = json.loads(run_mapctl("plan", "gpt2:layers=4,hidden=64,heads=4,vocab=256,seq=128,batch=8", "--devices", "8",
                              "--memory-per-device", "1200KiB", "--pipeline-stages", "1", "--report", str(long_names), "-o", "json",
                              check=0).stdout)
    names = [b["name"] for b in r["baselines"] if b.get("applicable", True)]
    assert "Megatron TP=2 x DP=4 + full recompute" in names, names
    labels = _assert_no_label_clipped(chromium, long_names, tmp_path)
    assert labels["memory"] == labels["steps"] == ["MAP plan", *names], labels


# Measures the report's SVG text in Chromium: a copy of the page with this script appended writes
# each SVG's box and every text's box (getBBox, in the SVG's own coordinates) into the DOM, which
# --dump-dom prints. The report itself stays script-free.
_MEASURE = """<pre id="measured"></pre><script>
const out = [];
for (const svg of document.querySelectorAll("svg")) {
  const box = svg.getBoundingClientRect();
  const rects = [...svg.querySelectorAll("rect")].map(r => r.x.baseVal.value);
  const texts = [...svg.querySelectorAll("text")].map(t => {
    const b = t.getBBox();
    return {text: t.textContent, label: t.classList.contains("label"), x0: b.x, x1: b.x + b.width};
  });
  out.push({id: svg.id, left: box.left, top: box.top, width: box.width, height: box.height,
            bars_x: rects.length ? Math.min(...rects) : null, texts: texts});
}
document.getElementById("measured").textContent = JSON.stringify(out);
</script>"""


def _assert_no_label_clipped(chromium, report, tmp_path, width=1400, height=2400):
    """Asserts that no text of the report's charts runs outside its SVG (where it would be cut off),
    that bar labels end left of the bars, and that the screenshot shows no ink on a chart's left
    edge (a name cut by the edge). Returns each bar chart's labels, top to bottom."""
    import html as html_module
    page = tmp_path / f"measure-{report.name}"
    page.write_text(report.read_text().replace("</body>", _MEASURE + "</body>"))
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
              f"--window-size={width},{height}"]
    dom = subprocess.run(common + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True,
                         cwd=tmp_path).stdout
    m = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    svgs = json.loads(html_module.unescape(m.group(1)))
    assert {"memory", "steps"} <= {s["id"] for s in svgs}, svgs
    png = tmp_path / f"measure-{report.stem}.png"
    subprocess.run(common + [f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120, check=True, cwd=tmp_path)
    from PIL import Image
    img = Image.open(png).convert("RGB")
    labels = {}
    for svg in svgs:
        assert svg["left"] >= 0 and svg["left"] + svg["width"] <= width, f"{svg['id']} is wider than the page: {svg}"
        for t in svg["texts"]:
            assert t["x0"] >= 0 and t["x1"] <= svg["width"], f"{svg['id']}: {t['text']!r} is cut off ({t}, width {svg['width']})"
        drawn = [t for t in svg["texts"] if t["label"]]
        if svg["id"] in ("memory", "steps"):
            assert drawn, svg
            labels[svg["id"]] = [t["text"] for t in drawn]
            for t in drawn:
                assert t["x1"] <= svg["bars_x"], f"{svg['id']}: {t['text']!r} runs into the bars ({t}, bars at {svg['bars_x']})"
            # The screenshot: no dark pixel (text) in the chart's first 3 columns, where a name the
            # edge cut would show.
            x0, top = round(svg["left"]), round(svg["top"])
            assert top + svg["height"] <= img.height, f"{svg['id']} is below the screenshot"
            ink = [(x, y) for x in range(x0, x0 + 3) for y in range(top, top + round(svg["height"]))
                   if sum(img.getpixel((x, y))) < 3 * 160]
            assert not ink, f"{svg['id']}: text at the chart's left edge, cut off: {ink[:5]}"
    return labels


def test_plan_micro_batches_are_chosen_pinned_or_refused():
    # A budget at which the whole batch of 8 does not fit one pass without recomputation: the
    # search runs it in micro-batches; pinned to 1 it does not fit; a count that does not divide
    # the batch, or a malformed one, is refused naming the flag.
    spec = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8"
    common = ("--devices", "4", "--device-type", "cpu", "--memory-per-device", "1MiB", "--recompute", "off",
              "--pipeline-stages", "1")
    auto = json.loads(run_mapctl("plan", spec, *common, "-o", "json", check=0).stdout)
    assert auto["fits"] and auto["micro_batches"] > 1 and auto["recomputed_layers"] == []
    one = run_mapctl("plan", spec, *common, "--micro-batches", "1", check=1)
    assert "no plan fits" in one.stderr and "with 1 micro-batch(es)" in one.stderr, one.stderr
    table = run_mapctl("plan", spec, *common, check=0).stdout
    assert re.search(r"Micro-batches: \d+ x \d+ samples per step \(gradients accumulated", table), table
    bad = run_mapctl("plan", spec, *common, "--micro-batches", "3", check=1)
    assert "3 micro-batches do not divide the global batch of 8" in bad.stderr
    junk = run_mapctl("plan", spec, *common, "--micro-batches", "many")
    assert junk.returncode != 0 and "--micro-batches 'many' is not auto or a count" in junk.stderr


def test_plan_reports_sequence_parallelism():
    # A GPT on an 8-way tensor-parallel mesh (batch 1): the norms split on the sequence, and the
    # JSON, the table and the saved plan say so (docs/planner.md, "Sequence parallelism").
    spec = "gpt2:layers=2,hidden=4096,heads=32,vocab=50304,seq=2048,batch=1"
    common = ("--mesh", "8", "--device-type", "h100-80g", "--zero", "0", "--recompute", "off", "--micro-batches", "1")
    r = json.loads(run_mapctl("plan", spec, *common, "-o", "json", check=0).stdout)
    assert r["precision"] == "bf16" and r["sequence_parallel"] and r["sequence_parallel_norms"] == 5, r["sequence_parallel_norms"]
    table = run_mapctl("plan", spec, *common, check=0).stdout
    assert "Sequence par.: yes (5 norms split on the sequence)" in table, table
    dp = json.loads(run_mapctl("plan", "gpt2:layers=2,hidden=64,heads=4,vocab=64,seq=8,batch=8", "--mesh", "8",
                               "--device-type", "cpu", "-o", "json", check=0).stdout)
    assert dp["sequence_parallel"] is False and dp["sequence_parallel_norms"] == 0, dp["sequence_parallel_norms"]


def test_plan_pipeline_stages_table_json_and_refusals():
    # Two stages pinned on 4 CPU devices: the table lists the stages; the JSON has the stages, the
    # schedule, the bubble, and a step that is the 1F1B formula of its stages (docs/planner.md,
    # "Pipeline stages"); stage counts that cannot be are refused naming the flag and why.
    spec = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8"
    common = ("--devices", "4", "--device-type", "cpu", "--memory-per-device", "1MiB", "--recompute", "off")
    r = json.loads(run_mapctl("plan", spec, *common, "--pipeline-stages", "2", "-o", "json", check=0).stdout)
    assert r["pipeline_stages"] == 2 and r["schedule"] == "1F1B" and r["devices"] == 4, r
    stages, m = r["stages"], r["micro_batches"]
    assert [s["first_layer"] for s in stages] == [0, stages[0]["end_layer"]] and stages[-1]["end_layer"] == 4, stages
    assert [s["micro_batches_in_flight"] for s in stages] == [min(2, m), 1], stages
    passes = [s["predicted_pass_seconds"] for s in stages]
    step = sum(passes) + (m - 1) * max(passes) + max(s["predicted_once_seconds"] for s in stages)
    assert abs(r["predicted_step_seconds"] - step) <= 1e-9 * step, (r["predicted_step_seconds"], step)
    assert 0 < r["bubble_fraction"] < 1 and r["predicted_peak_bytes"] <= 1 << 20, r
    assert r["predicted_peak_bytes"] == max(s["predicted_peak_bytes"] for s in stages)
    table = run_mapctl("plan", spec, *common, "--pipeline-stages", "2", check=0).stdout
    assert "Pipeline:     2 stages, 1F1B, each on 2 cpu (2 devices)" in table, table
    assert re.search(r"^0\s+h\.0", table, re.M) and "Megatron TP=1 x PP=2 x DP=2" in table, table
    flat = json.loads(run_mapctl("plan", spec, *common, "--pipeline-stages", "1", "-o", "json", check=0).stdout)
    assert flat["pipeline_stages"] == 1 and flat["pipelines"] == [] and "nodes" in flat, flat.keys()
    odd = run_mapctl("plan", spec, *common, "--pipeline-stages", "3", check=1)
    assert "3 pipeline stages do not divide 4 devices" in odd.stderr, odd.stderr
    many = run_mapctl("plan", spec, "--devices", "8", "--device-type", "cpu", "--pipeline-stages", "8", check=1)
    assert "8 pipeline stages for 4 layers" in many.stderr, many.stderr
    junk = run_mapctl("plan", spec, *common, "--pipeline-stages", "some")
    assert junk.returncode != 0 and "--pipeline-stages 'some' is not auto or a count" in junk.stderr, junk.stderr



def test_plan_saves_a_pipeline_plan_that_runs(tmp_path):
    # A two-stage plan saved: each stage with its layers and its graph's strategies (protoc decodes
    # it); `mapctl run --plan` runs it on 4 ranks, as one process would (docs/runtime.md).
    spec = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8"
    plan = tmp_path / "pipeline.pb"
    run_mapctl("plan", spec, "--devices", "4", "--device-type", "cpu", "--memory-per-device", "1MiB", "--recompute", "off",
               "--pipeline-stages", "2", "--save", str(plan), check=0)
    proto_dir = os.path.join(SOURCE_DIR, "proto")
    with open(plan, "rb") as f:
        text = subprocess.run(["protoc", f"-I{proto_dir}", "--decode=mapd.v1.Plan", "mapd/v1/plan.proto"], stdin=f,
                              capture_output=True, check=True, timeout=60).stdout.decode()
    assert "pipeline_stages: 2" in text and 'schedule: "1F1B"' in text and text.count("stages {") == 2, text[-2000:]
    assert 'first_layer_name: "h.0"' in text and "end_layer: 4" in text, text[-2000:]
    ran = run_mapctl("run", "--plan", str(plan), "--steps", "3", "--optimizer", "momentum", "--lr", "0.1", "--check-reference",
                     "-o", "json", check=0)
    r = json.loads(ran.stdout)
    assert r["pipeline_stages"] == 2 and r["ranks"] == 4 and r["plan"].startswith(f"saved plan {plan}: 2 stages x"), r["plan"]
    assert r["reference_max_relative_loss_difference"] < 1e-5 and r["reference_max_parameter_difference"] < 1e-5, r
    wrong = run_mapctl("run", "--plan", str(plan), "--ranks", "2", "--steps", "1", check=None)
    assert wrong.returncode != 0 and "on each of 2 stages has 4 devices" in wrong.stderr, wrong.stderr


@pytest.mark.long  # slow: the long form runs it (scripts/test.sh --long)
def test_plan_report_draws_the_pipeline_schedule_in_headless_chromium(tmp_path):
    # A two-stage plan's report: the stages' table and the 1F1B timeline (forward slots blue,
    # backward orange) at the top of the page, drawn by Debian's headless Chromium.
    report = tmp_path / "pipeline.html"
    run_mapctl("plan", "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8", "--devices", "4", "--device-type", "cpu",
               "--memory-per-device", "1MiB", "--recompute", "off", "--pipeline-stages", "2", "--report", str(report), check=0)
    html = report.read_text()
    assert "<script" not in html.lower()
    for element in ('id="stages"', 'id="schedule"', 'id="summary"', 'id="memory"'):
        assert element in html, element
    # 2 stages x 4 micro-batches x (forward, backward), and the legend.
    schedule = html[html.index('<svg id="schedule"'):]
    schedule = schedule[:schedule.index("</svg>")]
    assert schedule.count("<rect") == 2 * 4 * 2 + 2, schedule.count("<rect")
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (scripts/install-deps.sh installs it)"
    png = tmp_path / "pipeline.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", "--window-size=1200,480", f"--screenshot={png}", report.as_uri()],
                   capture_output=True, timeout=120, check=True, cwd=tmp_path)
    # Only the timeline is coloured in the page's top 480 pixels.
    assert _pixels(png, (0x4e, 0x79, 0xa7)) > 8 * 20 * 20, "forward slots missing"
    assert _pixels(png, (0xf2, 0x8e, 0x2b)) > 8 * 20 * 40, "backward slots missing"


def test_plan_pins_cost_the_pinned_configuration_beside_maps():
    four = "gpt2:layers=4,hidden=32,heads=4,vocab=64,seq=64,batch=8"
    r = json.loads(run_mapctl("plan", four, "--devices", "4", "--device-type", "cpu", "--pin",
                              "tp=1,pp=2,dp=2,mbs=1,recompute=full,schedule=interleaved:2", "-o", "json", check=0).stdout)
    assert r["pins"] == "tp=1,pp=2,dp=2,mbs=1,recompute=full,schedule=interleaved:2"
    assert r["pinned"] == "Megatron TP=1 x PP=2 x DP=2, interleaved x2 + full recompute"
    pinned = [b for b in r["pipeline_baselines"] if b["name"] == r["pinned"]]
    assert len(pinned) == 1 and pinned[0]["virtual_stages"] == 2 and len(pinned[0]["stages"]) == 4
    assert pinned[0]["micro_batches"] == 4 and pinned[0]["stage_mesh"] == [2]
    # The table names it too; a bad pin names its key; an interleaved plan is not saved as runnable.
    out = run_mapctl("plan", four, "--devices", "4", "--device-type", "cpu", "--pin", "tp=2", "--pipeline-stages", "1",
                     check=0).stdout
    assert re.search(r"Pinned: +tp=2 — 'Megatron TP=2 x DP=2", out), out
    bad = run_mapctl("plan", four, "--devices", "4", "--device-type", "cpu", "--pin", "tq=2")
    assert bad.returncode != 0 and "no key 'tq'" in bad.stderr
    clash = run_mapctl("plan", four, "--devices", "4", "--device-type", "cpu", "--pin", "tp=2,pp=2,dp=2")
    assert clash.returncode != 0 and "not the 4 devices" in clash.stderr

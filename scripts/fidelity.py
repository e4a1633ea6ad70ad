#!/usr/bin/python3
"""Predicted against measured peak memory (and step time) of fp32 AdamW training steps.

    /usr/bin/python3 scripts/fidelity.py [build/client/mapctl/mapctl] [--device-type PROFILE.json]

For each model below it runs `mapctl profile MODEL --measure -o json` (3 real steps on this
CPU, counted by the counting allocator) and prints a Markdown table of the errors; the table
in docs/profiler.md comes from this script. TorchScript models are traced first by
tests/import/models/make_models.py with Debian's python3-torch. Exits 1 if a peak error
exceeds 5%.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

ZOO = [
    "gpt2:layers=2,hidden=128,heads=4,vocab=512,seq=64,batch=4",
    "gpt2:layers=4,hidden=256,heads=8,vocab=2048,seq=128,batch=4",
    "llama2-7b:layers=2,hidden=128,heads=4,kv_heads=4,ffn=344,vocab=512,seq=64,batch=4",
    "llama2-70b:layers=2,hidden=256,heads=8,kv_heads=2,ffn=688,vocab=1024,seq=128,batch=4",
    "resnet50:image=64,batch=4,classes=10",
]
TRACED = [
    ("nanogpt_trace_train.pt", "idx:i64[8,16]"),
    ("llama_trace_train.pt", "tokens:i64[8,16]"),
    ("resnet_trace_train.pt", "x:f32[8,3,32,32]"),
    ("audio_encoder_trace_train.pt", "x:f32[8,1,4010]"),
    ("diffusion_unet_trace_train.pt", "x:f32[8,3,32,32] t:f32[8]"),
    ("topk_moe_trace_train.pt", "x:f32[8,64,8]"),
    ("message_passing_trace_train.pt", "x:f32[1024,8] edge_index:i64[2,8192]"),
    ("vae_trace_train.pt", "x:f32[1024,32]"),
    ("signal_ops_script.pt", "x:f32[32,2,256]"),
    ("torch_layers_trace_train.pt", "src:f32[8,64,16] tgt:f32[8,48,16]"),
]


def profile(mapctl, model, extra):
    out = subprocess.run([mapctl, "profile", model, "--measure", "--optimizer", "adamw", "-o", "json", *extra],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mapctl profile {model} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    args = sys.argv[1:]
    mapctl = os.path.join(ROOT, "build", "client", "mapctl", "mapctl")
    device = []
    if args and not args[0].startswith("--"):
        mapctl = args.pop(0)
    if args[:1] == ["--device-type"] and len(args) > 1:
        device = ["--device-type", args[1]]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "import", "models", "make_models.py"), tmp],
                       check=True, capture_output=True)
        rows = [(m, profile(mapctl, m, device)) for m in ZOO]
        rows += [(f"{f} ({spec})", profile(mapctl, os.path.join(tmp, f),
                                           [a for one in spec.split() for a in ("--input", one)] + device))
                 for f, spec in TRACED]
    print("| model | params | predicted peak | measured peak | peak error | predicted step | measured step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst = 0.0
    for name, r in rows:
        worst = max(worst, abs(r["peak_error"]))
        print(f"| `{name}` | {r['params']:,} | {r['predicted_peak_bytes']:,} | {r['measured_peak_bytes']:,} | "
              f"{100 * r['peak_error']:+.2f}% | {1e3 * r['predicted_step_seconds']:.1f} ms | "
              f"{1e3 * r['measured_step_seconds']:.1f} ms |")
    print(f"\nworst peak error: {100 * worst:.2f}%")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())

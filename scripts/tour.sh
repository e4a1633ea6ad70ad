#!/usr/bin/env bash
# A tour of mapctl without the daemons: install, build, then describe a zoo model and a PyTorch
# model traced right now by Debian's python3-torch, predict their training memory and check the
# prediction against real steps, plan llama2-7b on 64 devices, and train a small GPT on this
# repository's text. (MAP's main job — the coordinator and workers — is scripts/demo.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target mapctl mapctl-torch mapd-rank
BUILD_DIR="${MAPD_BUILD_DIR:-build}"
MAPCTL="$BUILD_DIR/client/mapctl/mapctl"
OUT="$BUILD_DIR/demo"
mkdir -p "$OUT"

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "mapctl models"
"$MAPCTL" models

step "mapctl inspect llama2-7b   (a zoo model: IR built symbolically, no weights allocated)"
"$MAPCTL" inspect llama2-7b

step "Tracing a nanoGPT model with /usr/bin/python3 (torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'))"
/usr/bin/python3 examples/export_nanogpt.py "$OUT/nanogpt.pt"

step "mapctl inspect $OUT/nanogpt.pt   (input spec embedded by the export script)"
"$MAPCTL" inspect "$OUT/nanogpt.pt"

step "mapctl profile llama2-7b --device-type h100-80g   (one training step predicted, no weights)"
"$MAPCTL" profile llama2-7b --device-type h100-80g | tail -7

step "mapctl plan llama2-7b:batch=8,seq=1024 --devices 64 --memory-per-device 40GiB   (mesh, ZeRO, a strategy per operator; baselines)"
"$MAPCTL" plan llama2-7b:batch=8,seq=1024 --devices 64 --memory-per-device 40GiB --report "$OUT/plan.html" | tail -22
echo "(HTML report: $OUT/plan.html)"

step "mapctl profile $OUT/nanogpt.pt --measure   (predicted vs measured on this CPU)"
"$MAPCTL" profile "$OUT/nanogpt.pt" --measure --timeline "$OUT/nanogpt-step.svg" | tail -8

step "mapctl run: a small GPT trained byte-level on this repository's docs"
cat README.md docs/*.md > "$OUT/corpus.txt"
"$MAPCTL" run gpt2:layers=2,hidden=128,heads=4,vocab=256,seq=64,batch=8 --data "text:$OUT/corpus.txt" \
  --steps 100 --lr 3e-3 --log-every 20

step "mapctl import $OUT/nanogpt.pt --input idx:i64[8,64] -o $OUT/nanogpt.json   (same model, another shape)"
"$MAPCTL" import "$OUT/nanogpt.pt" --input 'idx:i64[8,64]' -o "$OUT/nanogpt.json"
"$MAPCTL" inspect "$OUT/nanogpt.json" -o json | /usr/bin/python3 -c \
  'import json,sys; g=json.load(sys.stdin); print("graph file:", g["num_nodes"], "nodes,", g["num_parameters"], "parameters, logits", g["outputs"][0]["shape"])'

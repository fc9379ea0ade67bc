#!/bin/bash
# Bring your own network: the user's MNIST network and data loader of docs/training.md, trained
# with --model-file/--dataset-file, exported to ONNX and compared with ONNX Runtime, and a small
# student trained alone and distilled from it. For a GPU machine (and the CPU figure beside it).
#   benchmarks/byo_network/run.sh MNIST_FOLDER [OUT_FOLDER]
# MNIST_FOLDER holds t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz.
set -x
here=$(cd "$(dirname "$0")" && pwd)
mnist=$(cd "$1" && pwd) || exit 2
out=${2:-/tmp/byo_network}
mkdir -p "$out" && cd "$here" || exit 2
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
net=(--model-file my_models.py:MyNet --model-args '{"width": 16}'
     --dataset-file my_data.py:make_datasets --data "$mnist")
common=(--epochs 6 --batch-size 64 --lr 3e-3 --deterministic --no-progress --out-dir "$out/logs")
nvidia-smi --query-gpu=name,driver_version --format=csv
date -u
time $py -m edgesynth train "${net[@]}" "${common[@]}" --device cuda --name cuda
time $py -m edgesynth train "${net[@]}" "${common[@]}" --device cpu --name cpu
time $py -m edgesynth train "${net[@]}" "${common[@]}" --device cuda --nproc-per-node 2 \
    --name cuda-dp2 || echo "(one GPU: no data-parallel run)"
$py -m edgesynth export "$out/logs/cuda/qat_best.pth.tar" "${net[@]:0:4}" -o "$out/f.onnx"
$py -m edgesynth export "$out/logs/cuda/qat_best-q.pth.tar" "${net[@]:0:4}" -o "$out/q.onnx" -8
$py ort_top1.py "$out/logs/cuda" "$out/f.onnx" "$out/q.onnx" "$mnist"
student=(--model-file my_models.py:MyNet --model-args '{"width": 2}'
         --dataset-file my_data.py:make_datasets --data "$mnist" --train-limit 2000
         --epochs 4 --batch-size 64 --lr 3e-3 --deterministic --no-progress
         --out-dir "$out/logs" --device cuda)
time $py -m edgesynth train "${student[@]}" --name student-alone
time $py -m edgesynth train "${student[@]}" --name student-distilled \
    --teacher "$out/logs/cuda/qat_best.pth.tar" --teacher-model-file my_models.py:MyNet \
    --teacher-model-args '{"width": 16}'
date -u

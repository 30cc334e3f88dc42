#!/usr/bin/env bash
# The device checks of decode="device" (#16) as one prepared run, for a session lent a GPU:
#
#     bash benchmarks/gpu_check.sh            # from the repository root; results also under $OUT
#
# 1. installs the project with its test extras if recipes does not import;
# 2. the gpu-marked tests (CUDA decode within ~1 grey level of the CPU path, the per-sample
#    fallback, no host synchronisation per sample, the prefetcher's CUDA paths), ~1 minute;
# 3. benchmarks/gpu_feed.py: a ResNet-50 step fed three ways, ~3-4 minutes on an H200.
# Each step's output goes to the terminal and to $OUT (default ./gpu-check); a failing step
# does not stop the next, and the exit status is the tests'.
set -uo pipefail
out="${OUT:-gpu-check}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/gpu.txt"
python -c "import recipes" 2>/dev/null || python -m pip install -q -e ".[test]" 2>&1 | tail -3
python -c "import torch, torchcodec; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'torchcodec', torchcodec.__version__)" | tee -a "$out/gpu.txt"
python -m pytest -q -p no:cacheprovider -m gpu -rs tests 2>&1 | tee "$out/gpu_tests.txt"
status=${PIPESTATUS[0]}
timeout 420 python benchmarks/gpu_feed.py 2>&1 | tee "$out/gpu_feed.txt"
exit "$status"

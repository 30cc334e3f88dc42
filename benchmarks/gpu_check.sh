#!/usr/bin/env bash
# The device checks of decode="device" (#16) as one prepared run, for a session lent a GPU:
#
#     bash benchmarks/gpu_check.sh            # from the repository root; results also under $OUT
#
# 1. makes recipes' dependencies importable: the GPU machine has no network, so they come from
#    wheels carried in .whl/ (git-ignored; cp312 for its python3; benchmarks/gpu_wheels.sh fetches
#    them), installed with --no-index;
#    its image had torch and torchvision but no torchcodec, torchdata, msgspec or pycocotools;
# 2. the gpu-marked tests (CUDA decode within ~1 grey level of the CPU path, the per-sample
#    fallback, no host synchronisation per sample, the prefetcher's CUDA paths), ~1 minute,
#    collecting only the files that hold them (the others import optional test extras);
# 3. benchmarks/gpu_feed.py: a ResNet-50 step fed three ways, ~3-4 minutes on an H200.
# Each step's output goes to the terminal and to $OUT (default ./gpu-check); a failing step
# does not stop the next, and the exit status is the tests'.
set -uo pipefail
out="${OUT:-gpu-check}"
py="${PYTHON:-python3}"  # the GPU machine's interpreter with PyTorch is python3
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/gpu.txt"
df -h /dev/shm 2>&1 | tee -a "$out/gpu.txt"  # loader workers hand batches over in shared memory
wheels="${WHEELS:-.whl}" site="${SITE:-/tmp/site}"
if [ -d "$wheels" ] && ls "$wheels"/*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl 2>&1 | tail -3
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# `import recipes` alone succeeds from the repository root whatever is installed: import what runs
"$py" -c "import recipes.vision, recipes.multimodal, recipes.detection, pytest" 2>&1 | tail -1 | tee -a "$out/gpu.txt"
"$py" -c "import torch, torchcodec; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'torchcodec', torchcodec.__version__)" 2>&1 | tee -a "$out/gpu.txt"
mapfile -t files < <(grep -rl --include='test_*.py' 'mark\.gpu' tests | sort)
"$py" -m pytest -q -p no:cacheprovider -m gpu -rs "${files[@]}" 2>&1 | tee "$out/gpu_tests.txt"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then  # one try: tell a warning turned error (pyproject) from a real failure
    "$py" -m pytest -q -p no:cacheprovider -m gpu -rs -W default "${files[@]}" 2>&1 | tee "$out/gpu_tests_warnings_not_errors.txt"
fi
timeout 420 "$py" benchmarks/gpu_feed.py 2>&1 | tee "$out/gpu_feed.txt"
exit "$status"

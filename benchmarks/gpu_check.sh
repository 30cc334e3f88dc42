#!/usr/bin/env bash
# The device checks of decode="device" as one prepared run, for a machine with a CUDA GPU:
#
#     bash benchmarks/gpu_check.sh            # from the repository root; results also under $OUT
#
# 1. makes recipes' dependencies importable: a GPU machine without network gets them from wheels
#    carried in .whl/ (git-ignored; benchmarks/gpu_wheels.sh fetches them), installed with --no-index;
# 2. the gpu-marked tests (the CUDA paths held to a full-resolution reference, no host
#    synchronisation per batch, the prefetcher's CUDA paths), about a minute, collecting only the
#    files that hold them (the others import optional test extras);
# 3. benchmarks/gpu_feed.py, one table: the ResNet-50 and ResNet-18 ceilings, the nvJPEG limit,
#    each loader alone and each feeding a step, and the crossover; about 3 minutes on an H200.
# The whole run stays under 6 minutes. Each step's output goes to the terminal and to $OUT
# (default ./gpu-check); a failing step does not stop the next, and the exit status is the tests'.
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
cache=(-o "cache_dir=$out/.pytest_cache")
"$py" -m pytest -q "${cache[@]}" -m gpu -rs "${files[@]}" 2>&1 | tee "$out/gpu_tests.txt"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then  # one try: the failures again, to tell a warning turned error (pyproject) from a real failure
    "$py" -m pytest -q "${cache[@]}" --lf -m gpu -rs -W default "${files[@]}" 2>&1 | tee "$out/gpu_tests_warnings_not_errors.txt"
fi
timeout 270 "$py" benchmarks/gpu_feed.py 2>&1 | tee "$out/gpu_feed.txt"
exit "$status"

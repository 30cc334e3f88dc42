#!/usr/bin/env bash
# Fetch, here, the wheels benchmarks/gpu_check.sh installs on the lent GPU machine, which has no
# network: its python3 (3.12, x86-64) has torch and torchvision but none of these.
#
#     bash benchmarks/gpu_wheels.sh        # from the repository root; fills .whl/ (git-ignored)
#
# Then run `bash benchmarks/gpu_check.sh` there with `.whl` carried (about 11 MB).
# torchcodec 0.12 and later work with torch 2.11 and later (torchcodec's README), the GPU
# machine's torch; the versions are the ones this repository is tested with.
set -euo pipefail
rm -rf .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    torchcodec==0.17.0 torchdata==0.11.0 msgspec==0.23.0 pycocotools==2.0.11
ls -l .whl

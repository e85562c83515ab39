#!/usr/bin/env bash
# Packs what a lent GPU machine lacks into .gpu/bundle.tar.xz (git-ignored; carry it): the
# trainer and unit_tests from build/, the shared libraries they load that are not glibc or the
# CUDA libraries (that machine's image has no Debian packages), Fashion-MNIST's test set (which
# scripts/device_env.sh also serves as the training set: throughput only) and Debian's fortunes.
# Usage: scripts/device_bundle.sh   then on the device: source scripts/device_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/fmnist" "$stage/fortunes" .gpu
cp build/trainer build/tests/unit_tests build/tests/integration_tests "$stage/bin/"
ldd build/trainer build/tests/unit_tests build/tests/integration_tests | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so' |
  xargs -I{} cp -L {} "$stage/lib/"
cp /usr/share/datasets/fashion-mnist/t10k-*.gz "$stage/fmnist/"
cp -rL /usr/share/games/fortunes/. "$stage/fortunes/"
tar -C "$stage" -cf - . | xz -T0 -6 > .gpu/bundle.tar.xz
ls -la .gpu/bundle.tar.xz

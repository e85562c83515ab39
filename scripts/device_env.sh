# Sourced on a lent GPU machine, in the repository root, after scripts/device_bundle.sh made
# .gpu/bundle.tar.xz here and the call carried it: unpacks it to /tmp/tr, puts the bundled
# libraries and the machine's cuBLAS/cuDNN/NCCL on LD_LIBRARY_PATH, links the build's paths
# (build/, the tests' absolute source path), Fashion-MNIST's and the fortunes' directories.
set -e
mkdir -p /tmp/tr && tar -xJf .gpu/bundle.tar.xz -C /tmp/tr
cuda_dirs=$(find /usr/local /opt /usr/lib -name 'libcublasLt.so.13' -o -name 'libcudnn.so.9' -o -name 'libnccl.so.2' 2>/dev/null |
  xargs -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH="/tmp/tr/lib:$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p build/tests && cp /tmp/tr/bin/trainer build/ && cp /tmp/tr/bin/unit_tests /tmp/tr/bin/integration_tests build/tests/
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
d=/usr/share/datasets/fashion-mnist; mkdir -p $d
for f in images-idx3 labels-idx1; do cp /tmp/tr/fmnist/t10k-$f-ubyte.gz $d/; cp /tmp/tr/fmnist/t10k-$f-ubyte.gz $d/train-$f-ubyte.gz; done
mkdir -p /usr/share/games && rm -rf /usr/share/games/fortunes && ln -s /tmp/tr/fortunes /usr/share/games/fortunes
set +e

#!/usr/bin/env bash
# Checks here, without a GPU, that the GPU bundle (tools/gpu_bundle.sh) runs
# on nothing but its own libraries, glibc and CUDA's. The archive is unpacked
# into a throwaway root directory that holds only glibc, dash and bash, and
# CUDA's five libraries (as the GPU machine would give them); in a private
# mount namespace (/proc, /sys and /dev bound in), chrooted there, with an
# empty environment:
#   1. fsdpc train --model gpt2-tiny       one process (MPI singleton: orted)
#   2. mpirun -np 2 fsdpc train ... zero3  mpirun, orted, vader, PMIx, the MCA components
#   3. gpu_train_test                      exits 77 (skipped: no device)
# Then, outside the chroot, LD_DEBUG=libs lists every library fsdpc loads;
# any that comes neither from the bundle nor from glibc or CUDA fails.
# Needs root (unshare, chroot, mount). About 7 s on the development VM.
#
#   bash tools/gpu_bundle_check.sh [ARCHIVE]    default gpu-bundle/fsdpc-gpu.tar.xz
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
archive=${1:-$root/gpu-bundle/fsdpc-gpu.tar.xz}
if (($# > 1)) || [[ "$archive" == -* ]]; then
  echo "usage: tools/gpu_bundle_check.sh [ARCHIVE]   (default gpu-bundle/fsdpc-gpu.tar.xz)" >&2
  exit 2
fi
[[ -f "$archive" ]] || { echo "gpu_bundle_check.sh: $archive not found (bash tools/gpu_bundle.sh builds it)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "gpu_bundle_check.sh: needs root (unshare, chroot)" >&2; exit 2; }
cuda_lib=${CUDA_LIB:-/usr/local/cuda/lib64}

jail=$(mktemp -d /tmp/fsdpc-bundle-root.XXXXXX)
trap 'rm -rf "$jail"' EXIT
tar -xJf "$archive" -C "$jail"
b=/fsdpc-gpu

# glibc, the shells, CUDA's libraries; nothing else from this machine.
mkdir -p "$jail"/{lib64,lib/x86_64-linux-gnu,bin,cuda,tmp,proc,sys,dev,etc,root}
cp -L /lib64/ld-linux-x86-64.so.2 "$jail/lib64/"
for l in libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 libresolv.so.2; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$jail/lib/x86_64-linux-gnu/"
done
cp -L /bin/dash "$jail/bin/sh"
# bash (env.sh is bash) with its libtinfo, put beside it, not in a system path.
mkdir -p "$jail/opt/bash"
cp -L /bin/bash "$jail/opt/bash/bash"
cp -L "$(ldd /bin/bash | sed -n 's/.*libtinfo[^ ]* => \([^ ]*\).*/\1/p')" "$jail/opt/bash/"
patchelf --set-rpath '$ORIGIN' "$jail/opt/bash/bash"
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libnccl.so.2; do
  cp -L "$cuda_lib/$l" "$jail/cuda/"
done
cp -L "$cuda_lib"/libnvrtc-builtins.so.* "$jail/cuda/" 2>/dev/null || true
echo 'root:x:0:0:root:/root:/bin/sh' >"$jail/etc/passwd"
echo 'root:x:0:' >"$jail/etc/group"
printf '127.0.0.1 localhost %s\n' "$(hostname)" >"$jail/etc/hosts"

cat >"$jail/check.sh" <<EOF
set -eu
. $b/env.sh
export LD_LIBRARY_PATH=/cuda
cd /tmp
echo "== 1. fsdpc train --model gpt2-tiny (one process)"
fsdpc train --model gpt2-tiny --steps 5 --seq 32 --batch 8 --log-every 5
echo "== 2. mpirun -np 2 fsdpc train --model gpt2-tiny --strategy zero3"
mpirun -np 2 --oversubscribe fsdpc train --model gpt2-tiny --strategy zero3 --steps 5 --seq 32 --batch 8 --log-every 5
echo "== 3. gpu_train_test without a device"
rc=0; gpu_train_test || rc=\$?
echo "exit \$rc"
[ "\$rc" = 77 ]
EOF
echo "gpu_bundle_check.sh: in a chroot with only glibc, dash, bash, CUDA's libraries and the bundle"
unshare -m --propagation private bash -c '
  set -e
  j=$1
  mount -t proc proc "$j/proc"
  mount --rbind /sys "$j/sys"
  mount --rbind /dev "$j/dev"
  mount -t tmpfs tmpfs "$j/tmp"
  exec env -i HOME=/root PATH=/opt/bash /usr/sbin/chroot "$j" /opt/bash/bash /check.sh
' _ "$jail" 2>&1 || { echo "gpu_bundle_check.sh: FAILED in the chroot" >&2; exit 1; }

echo "== 4. every library fsdpc loads (LD_DEBUG=libs), outside the chroot"
loaded=$(cd /tmp && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$jail/cuda" LD_DEBUG=libs \
           "$jail$b/bin/fsdpc" models 2>&1 >/dev/null | sed -n 's/.*calling init: \(.*\)/\1/p' | sort -u)
bad=$(grep -v -E "^$jail$b/(bin/\.\./)?lib/|^$jail/cuda/|^/lib/x86_64-linux-gnu/(libc|libm|libmvec|libpthread|libdl|librt)\.so|^/lib64/ld-linux" <<<"$loaded" || true)
echo "$loaded" | sed "s|$jail|<root>|; s/^/  /"
if [[ -n "$bad" ]]; then
  echo "gpu_bundle_check.sh: loaded from outside the bundle:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "gpu_bundle_check.sh: passed"

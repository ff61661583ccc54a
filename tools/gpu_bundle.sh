#!/usr/bin/env bash
# Builds what a run on a bare CUDA machine needs (docs/gpu.md): fsdpc, the
# GPU tests (test/gpu/*, CTest label gpu) and the shared libraries they load
# that such a machine lacks (oneDNN, Open MPI with mpirun, orted and its MCA
# components, PMIx, LLVM 15, mimalloc, libcrypto, libstdc++, ...), in one
# archive: gpu-bundle/fsdpc-gpu.tar.xz. Every binary finds its libraries
# through RPATH ($ORIGIN/../lib, set with patchelf). CUDA's own libraries
# (cudart, cuBLAS/cuBLASLt, NVRTC, NCCL) are not carried: tools/gpu_check.sh
# takes them from the GPU machine. The archive travels to the GPU machine
# with the working tree, 64 MiB in all, so the script fails when the
# archive and the tracked files together exceed 63 MiB.
#
#   bash tools/gpu_bundle.sh                 configure and build build-bundle/, then pack
#   bash tools/gpu_bundle.sh --no-build      pack what build-bundle/ holds
#   FSDPC_JOBS=1 bash tools/gpu_bundle.sh    build with one job (default: nproc)
#
# The build is tools/build.sh's configuration (RelWithDebInfo -g1, so the
# compiler cache is shared with build/) with the CUDA executor required;
# the bundle's copies are stripped. The unpacked tree stays in
# build-bundle/stage/fsdpc-gpu for checks here (tools/gpu_bundle_check.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build=1
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$a' (--no-build, --help)" >&2; exit 2 ;;
  esac
done

bdir=build-bundle
outdir=gpu-bundle
archive="$outdir/fsdpc-gpu.tar.xz"
limit_mib=63  # the device tool's 64 MiB, less a margin for untracked files
gpu_tests=(gpu_fusion_test gpu_kernels_test gpu_nccl_dim_test gpu_nccl_test gpu_nccl_train_test
           gpu_nn_kernels_test gpu_nn_launch_test gpu_train_test)

for tool in patchelf strip xz ldd objdump readelf; do
  command -v "$tool" >/dev/null || { echo "gpu_bundle.sh: $tool not found (bash tools/install-deps.sh installs it)" >&2; exit 1; }
done

if ((build)); then
  bash tools/install-deps.sh
  cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFSDPC_WERROR=ON -DFSDPC_CUDA=ON >/dev/null
  targets=(--target fsdpc)
  for t in "${gpu_tests[@]}"; do targets+=(--target "$t"); done
  cmake --build "$bdir" -j "${FSDPC_JOBS:-$(nproc)}" "${targets[@]}"
fi
[[ -x "$bdir/tools/fsdpc" ]] || { echo "gpu_bundle.sh: $bdir/tools/fsdpc not built (run without --no-build)" >&2; exit 1; }
for t in "${gpu_tests[@]}"; do
  [[ -x "$bdir/test/$t" ]] || { echo "gpu_bundle.sh: $bdir/test/$t not built (run without --no-build)" >&2; exit 1; }
done

stage="$bdir/stage/fsdpc-gpu"
rm -rf "$bdir/stage"
mkdir -p "$stage"/{bin,lib/openmpi,lib/pmix,share/openmpi,share/pmix,etc}

# Not carried: glibc's libraries (the machine's own must be new enough:
# gpu_check.sh compares with MANIFEST's glibc_needed) and CUDA's, which must
# match the machine's driver.
is_system_lib() {
  case "$1" in
    linux-vdso.so.*|ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libmvec.so.*|libpthread.so.*|libdl.so.*|librt.so.*) return 0 ;;
    libutil.so.*|libresolv.so.*|libanl.so.*) return 0 ;;
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libnvrtc.so.*|libnvrtc-builtins.so.*|libnccl.so.*) return 0 ;;
  esac
  return 1
}
cuda_lib() {
  case "$1" in libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libnvrtc.so.*|libnccl.so.*) return 0 ;; esac
  return 1
}

# fsdpc and the GPU tests, stripped.
strip -o "$stage/bin/fsdpc" "$bdir/tools/fsdpc"
for t in "${gpu_tests[@]}"; do strip -o "$stage/bin/$t" "$bdir/test/$t"; done

# Open MPI 4.1 as Debian 12 ships it: mpirun (orterun) and orted, and the MCA
# components a single node needs. Left out: the components for InfiniBand,
# UCX, libfabric, PSM and OpenSHMEM (they would bring those libraries) and
# netlink reachability (libnl; the weighted one stays).
ompi_pkglib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
pmix_lib=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
[[ -d "$ompi_pkglib" && -x /usr/bin/orterun && -x /usr/bin/orted ]] ||
  { echo "gpu_bundle.sh: Open MPI's components or mpirun not found ($ompi_pkglib, /usr/bin/orterun)" >&2; exit 1; }
cp /usr/bin/orterun /usr/bin/orted "$stage/bin/"
ln -s orterun "$stage/bin/mpirun"
ln -s orterun "$stage/bin/mpiexec"
for c in "$ompi_pkglib"/mca_*.so; do
  name=$(basename "$c")
  if readelf -d "$c" | grep -q -E 'NEEDED.*\[(libucp|libucs|libfabric|libpsm|libibverbs|liboshmem|libnl-)'; then
    continue
  fi
  cp "$c" "$stage/lib/openmpi/$name"
done
cp "$pmix_lib"/*.so "$stage/lib/pmix/" 2>/dev/null || true
cp /usr/share/openmpi/*.txt "$stage/share/openmpi/" 2>/dev/null || true
cp /usr/lib/x86_64-linux-gnu/pmix2/share/pmix/*.txt "$stage/share/pmix/" 2>/dev/null || true
# An empty parameter file: the machine's /etc/openmpi (if any) is not read
# (OPAL_SYSCONFDIR points here); env.sh sets what a run needs.
: >"$stage/etc/openmpi-mca-params.conf"

# Every shared library the binaries and components load, resolved here,
# except the machine's own (is_system_lib), copied once into lib/.
declare -A copied=()
cuda_needed=()
collect() {
  local elf=$1 line name path
  while read -r line; do
    name=${line%% *}
    path=$(sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' <<<"$line")
    if [[ "$line" == *"not found"* ]]; then
      echo "gpu_bundle.sh: $elf needs $name, which is not installed here" >&2; exit 1
    fi
    if cuda_lib "$name"; then cuda_needed+=("$name"); fi
    is_system_lib "$name" && continue
    [[ -n "$path" && -z "${copied[$name]:-}" ]] || continue
    copied[$name]=1
    cp -L "$path" "$stage/lib/$name"
    chmod u+w "$stage/lib/$name"
  done < <(ldd "$elf" | sed 's/^[[:space:]]*//')
}
for f in "$stage"/bin/* "$stage"/lib/openmpi/*.so "$stage"/lib/pmix/*.so; do
  [[ -L "$f" ]] && continue
  collect "$f"
done
# The libraries' own dependencies are in ldd's closure already; strip what
# carries symbols beyond the dynamic ones.
for f in "$stage"/lib/*.so* "$stage"/lib/openmpi/*.so "$stage"/lib/pmix/*.so; do
  strip --strip-unneeded "$f" 2>/dev/null || true
done

# RPATH: bin/ -> ../lib; lib/ -> itself; the components -> their parent.
for f in "$stage"/bin/*; do [[ -L "$f" ]] || patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$stage"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done
for f in "$stage"/lib/openmpi/*.so "$stage"/lib/pmix/*.so; do patchelf --set-rpath '$ORIGIN/..' "$f"; done

# The newest glibc symbol version anything in the bundle asks for.
glibc_needed=$(for f in "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/openmpi/*.so "$stage"/lib/pmix/*.so; do
                 [[ -L "$f" ]] || objdump -T "$f" 2>/dev/null
               done | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -t. -k2,2n -u | tail -1)
glibcxx_carried=$(grep -a -o 'GLIBCXX_3\.4\.[0-9]*' "$stage/lib/libstdc++.so.6" | sort -t. -k3,3n -u | tail -1)
mapfile -t cuda_sorted < <(printf '%s\n' "${cuda_needed[@]}" | sort -u)

cat >"$stage/env.sh" <<'EOF'
# Sourced by tools/gpu_check.sh (or by hand: `. fsdpc-gpu/env.sh`): the
# bundle's programs first on PATH, and Open MPI and PMIx pointed at the
# bundle's components, help files and (empty) parameter file instead of
# the paths Debian compiled in.
b=${BASH_SOURCE[0]}
[[ "$b" == */* ]] && b=${b%/*} || b=.
b=$(cd "$b" && pwd)  # builtins only: the bundle may be all a minimal system has
export PATH="$b/bin:$PATH"
export OPAL_PREFIX="$b" OPAL_EXEC_PREFIX="$b" OPAL_BINDIR="$b/bin" OPAL_LIBDIR="$b/lib"
export OPAL_PKGLIBDIR="$b/lib/openmpi" OPAL_DATADIR="$b/share" OPAL_DATAROOTDIR="$b/share"
export OPAL_PKGDATADIR="$b/share/openmpi" OPAL_SYSCONFDIR="$b/etc"
export OMPI_MCA_mca_base_component_path="$b/lib/openmpi"
export PMIX_MCA_mca_base_component_path="$b/lib/pmix" PMIX_INSTALL_PREFIX="$b"
# One node: daemons started locally (plm isolated: rsh's would want ssh),
# shared memory and TCP, no single-copy kernel mechanism (CMA may be refused
# in a VM or container), no component load warnings for what is left out.
# Root may run ranks (the GPU machine runs commands as root).
export OMPI_MCA_plm="isolated" OMPI_MCA_btl="self,vader,tcp" OMPI_MCA_pml="ob1" OMPI_MCA_btl_vader_single_copy_mechanism="none"
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export FSDPC_BIN="$b/bin/fsdpc" FSDPC_MPIEXEC="$b/bin/mpirun"
unset b
EOF

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
{
  echo "{"
  echo "  \"commit\": \"$commit\", \"dirty\": $dirty,"
  echo "  \"built\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"built_on\": \"$(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2)\","
  echo "  \"cuda_toolkit\": \"$(/usr/local/cuda/bin/nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')\","
  echo "  \"cuda_code\": \"$(grep -o -- '--generate-code=arch=compute_[0-9]*,code=\[[a-z_0-9,]*\]' "$bdir/build.ninja" |
                             sed 's/.*code=\[\(.*\)\]/\1/' | tr ',' '\n' | sort -u | paste -sd' ')\","
  echo "  \"glibc_needed\": \"$glibc_needed\","
  echo "  \"glibcxx_carried\": \"$glibcxx_carried\","
  printf '  "cuda_libraries_needed": ['; printf '"%s", ' "${cuda_sorted[@]}" | sed 's/, $//'; echo '],'
  printf '  "carried": ['; (cd "$stage/lib" && ls *.so*) | sed 's/.*/"&"/' | paste -sd, | sed 's/,/, /g' | tr -d '\n'; echo ']'
  echo "}"
} >"$stage/MANIFEST.json"

# One archive. xz -9e with a 192 MiB dictionary: the test executables each
# link the whole library, and a window that spans them stores it about once.
mkdir -p "$outdir"
rm -f "$archive"
(cd "$bdir/stage" && tar --owner=0 --group=0 --sort=name -cf - fsdpc-gpu) |
  xz -T1 --lzma2=preset=9e,dict=192MiB >"$archive.tmp"
mv "$archive.tmp" "$archive"

unpacked=$(du -sb "$stage" | cut -f1)
packed=$(stat -c %s "$archive")
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "gpu_bundle.sh: $archive: $(mib "$packed") ($(mib "$unpacked") unpacked; tracked files $(mib "$tracked"))"
echo "gpu_bundle.sh: needs glibc >= $glibc_needed and, from the GPU machine, ${cuda_sorted[*]}"
if ((packed + tracked > limit_mib * 1048576)); then
  echo "gpu_bundle.sh: the archive and the tracked files exceed $limit_mib MiB, more than a run can carry" >&2
  exit 1
fi

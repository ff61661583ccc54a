#!/usr/bin/env bash
# The first GPU run in one command (docs/gpu.md). On a CUDA machine with
# nothing of fsdpc's installed, from the working tree and the bundle that
# tools/gpu_bundle.sh built: five stages, each under its own time cap and
# all within FSDPC_GPU_CHECK_DEADLINE_S (default 530 s, well inside a
# 10-minute slot), in an order where one that fails still leaves the next
# its turn:
#   1 versions  the device, driver, CUDA libraries (taken from the machine:
#               the toolkit, then PyTorch's nvidia wheels), glibc, PyTorch;
#               the bundle unpacked and fsdpc started once
#   2 tests     the GPU tests (ctest -L gpu), at once: every kernel against
#               the CPU executor, fused against unfused, gpt2-tiny on CUDA
#               against the CPU's losses
#   3 nccl      NCCL in a world of one: gpu_nccl_test, the two-GPU tests
#               (skipped on one), gpt2-tiny with FSDPC_KEEP_COLLECTIVES=1
#               (collectives kept, timed, under --timeout) against without
#   4 bench     bench/gpu/run.sh: gpt2 and gpt2-medium in bf16, MFU
#   5 torch     bench/gpu/torch_gpu_step.py: PyTorch eager, FSDP2 on one
#               rank and torch.compile on the same models; ratios to stage 4
# Without a GPU every stage that needs one reports skipped, with the reason.
# Writes 7 files under OUT: summary.json (each stage's status, reason,
# seconds and figures; rewritten after every stage), check.log (all of this
# output), versions.txt, tests.log, nccl.log, bench.log, torch.log.
#
#   tools/gpu_check.sh [BUNDLE] [--out DIR]
#     BUNDLE  gpu-bundle/fsdpc-gpu.tar.xz (default), an unpacked bundle
#             folder (holding env.sh), or a build folder (tools/fsdpc,
#             test/gpu_*) whose libraries are installed here
#     DIR     default $OUT, else ./gpu-check-out
#   PYTHON (default python3) runs PyTorch; FSDPC_CUDA_LIB_DIRS (a:b) is
#   searched for CUDA's libraries first. Exit 0 when no stage failed, 1
#   when one did, 2 on bad arguments.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { echo "usage: tools/gpu_check.sh [BUNDLE] [--out DIR]   (BUNDLE: .tar.xz, bundle folder or build folder)" >&2; exit 2; }
src="" out=${OUT:-}
while (($#)); do
  case "$1" in
    --out) (($# >= 2)) || usage; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_check.sh: unknown option '$1'" >&2; usage ;;
    *) [[ -z "$src" ]] || { echo "gpu_check.sh: one BUNDLE only" >&2; usage; }; src=$1; shift ;;
  esac
done
src=${src:-$root/gpu-bundle/fsdpc-gpu.tar.xz}
out=${out:-$PWD/gpu-check-out}
[[ -e "$src" ]] || { echo "gpu_check.sh: $src not found (tools/gpu_bundle.sh builds the bundle)" >&2; exit 2; }
deadline=${FSDPC_GPU_CHECK_DEADLINE_S:-530}
[[ "$deadline" =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: FSDPC_GPU_CHECK_DEADLINE_S must be a whole number of seconds" >&2; exit 2; }
py=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$(cd "$(dirname "$src")" && pwd)/$(basename "$src")
rm -f "$out"/{summary.json,check.log,versions.txt,tests.log,nccl.log,bench.log,torch.log}
touch "$out"/{versions.txt,tests.log,nccl.log,bench.log,torch.log}  # each there even when its stage did not run

# PyTorch runs in the environment this script was given: not on the CUDA
# libraries picked for fsdpc (LD_LIBRARY_PATH wins over its wheels' RPATH),
# nor with the bundle's PATH and Open MPI settings.
orig_path=$PATH orig_ld_set=${LD_LIBRARY_PATH+x} orig_ld=${LD_LIBRARY_PATH:-}
in_given_env() {
  if [[ -n "$orig_ld_set" ]]; then env LD_LIBRARY_PATH="$orig_ld" PATH="$orig_path" "$@"
  else env -u LD_LIBRARY_PATH PATH="$orig_path" "$@"; fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/fsdpc-gpu-check.XXXXXX")
exec 3>&1 4>&2
exec > >(tee "$out/check.log") 2>&1
tee_pid=$!
cleanup() { rm -rf "$work"; exec 1>&3 2>&4; wait "$tee_pid" 2>/dev/null || true; }
trap cleanup EXIT
cd "$work"  # fsdpc writes fsdpc-flight/ into the current folder on errors

t0=$(date +%s)
now() { echo $(($(date +%s) - t0)); }
left() { echo $((deadline - $(now))); }
# The seconds a step may take: its own cap, or what is left less a margin.
cap() { local l; l=$(($(left) - 8)); echo $((l < $1 ? l : $1)); }
# A JSON string.
js() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t\r' '   ' | tr -d '\000-\037')"; }
say() { printf '\n== %s\n' "$*"; }

stages=()  # one JSON object per stage, in order
failed=0
# record NAME STATUS REASON SECONDS [FIGURES]: FIGURES is JSON (default {}).
record() {
  local f=${5:-}
  [[ -n "$f" ]] || f='{}'
  stages+=("{\"stage\": $(js "$1"), \"status\": $(js "$2"), \"reason\": $(js "$3"), \"seconds\": $4, \"figures\": $f}")
  [[ "$2" != failed ]] || failed=1
  printf '%s: %s%s (%s s)\n' "$1" "$2" "${3:+: $3}" "$4"
  write_summary
}
device_name="" driver=""
write_summary() {
  local s st sep=""
  s="{\"tool\": \"tools/gpu_check.sh\", \"started\": $(js "$(date -u -d "@$t0" +%Y-%m-%dT%H:%M:%SZ)"), \"seconds\": $(now),"
  s+=" \"bundle\": $(js "$src"), \"device\": $(js "$device_name"), \"driver\": $(js "$driver"),"
  s+=" \"ok\": $([[ $failed == 0 ]] && echo true || echo false), \"stages\": ["
  for st in "${stages[@]}"; do s+="$sep"$'\n    '"$st"; sep=","; done
  s+=$'\n  ]}'
  printf '%s\n' "$s" >"$out/summary.json"
}
# status_of RC: the word for a test executable's exit status.
status_of() {
  case "$1" in 0) echo passed ;; 77) echo skipped ;; 124|137) echo timeout ;; *) echo failed ;; esac
}

# ---------------------------------------------------------------- 1 versions
say "1 versions"
s0=$(now)
v="$out/versions.txt"
runnable=1 why_not=""
mode=""
if [[ -f "$src" ]]; then
  mode=bundle
  mkdir -p "$work/bundle"
  if ! tar -xJf "$src" -C "$work/bundle" 2>/dev/null; then
    "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$src" "$work/bundle" ||
      { runnable=0; why_not="could not unpack $src (neither tar -xJ nor $py's tarfile)"; }
  fi
  bundle="$work/bundle/fsdpc-gpu"
elif [[ -f "$src/env.sh" && -x "$src/bin/fsdpc" ]]; then
  mode=bundle bundle=$src
elif [[ -x "$src/tools/fsdpc" ]]; then
  mode=build
else
  echo "gpu_check.sh: $src is neither a bundle archive, a bundle folder nor a build folder" >&2
  exit 2
fi
if [[ $mode == bundle ]]; then
  # shellcheck disable=SC1091
  [[ $runnable == 0 ]] || . "$bundle/env.sh"
  bin="$bundle/bin" tests="$bundle/bin"
else
  bin="$src/tools" tests="$src/test"
  export FSDPC_BIN="$bin/fsdpc"
fi
fsdpc="$bin/fsdpc"

# CUDA's libraries, from the machine: FSDPC_CUDA_LIB_DIRS, the toolkit,
# PyTorch's wheels (nvidia/*/lib, torch/lib), the system folders. Each one
# is linked into one folder put first on LD_LIBRARY_PATH.
cuda_needed=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libnccl.so.2)
if [[ $mode == bundle && -f "$bundle/MANIFEST.json" ]]; then
  mapfile -t cuda_needed < <(sed -n 's/.*"cuda_libraries_needed": \[\(.*\)\].*/\1/p' "$bundle/MANIFEST.json" | tr -d '" ' | tr , '\n')
elif [[ $mode == build ]] && command -v readelf >/dev/null; then
  # A build without the CUDA executor needs none of them.
  mapfile -t cuda_needed < <(readelf -d "$fsdpc" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' |
                             grep -E '^lib(cudart|cublas|cublasLt|nvrtc|nccl)\.so' || true)
fi
have_py=0
command -v "$py" >/dev/null 2>&1 && have_py=1
dirs=()
IFS=: read -ra extra <<<"${FSDPC_CUDA_LIB_DIRS:-}"
dirs+=("${extra[@]}" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib)
if ((have_py)); then
  mapfile -t wheel_dirs < <(timeout 30 "$py" - <<'EOF' 2>/dev/null || true
import importlib.util, os
roots = []
for name in ("nvidia", "torch"):
    spec = importlib.util.find_spec(name)
    if spec and spec.submodule_search_locations:
        roots += list(spec.submodule_search_locations)
seen = set()
for r in roots:
    for dp, _, files in os.walk(r):
        if dp not in seen and any(f.startswith(("libcudart.so", "libcublas", "libnvrtc", "libnccl")) for f in files):
            seen.add(dp)
            print(dp)
EOF
  )
  dirs+=("${wheel_dirs[@]}")
fi
dirs+=(/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64)
mkdir -p "$work/cuda-lib"
cuda_missing=() cuda_found=()
for lib in "${cuda_needed[@]}"; do
  found=""
  for d in "${dirs[@]}"; do
    [[ -n "$d" && -e "$d/$lib" ]] && { found="$d/$lib"; break; }
  done
  if [[ -z "$found" ]]; then cuda_missing+=("$lib"); continue; fi
  ln -sf "$found" "$work/cuda-lib/$lib"
  cuda_found+=("$lib -> $(readlink -f "$found")")
  if [[ $lib == libnvrtc.so.* ]]; then
    for f in "$(dirname "$found")"/libnvrtc-builtins.so*; do [[ -e "$f" ]] && ln -sf "$f" "$work/cuda-lib/"; done
  fi
done
export LD_LIBRARY_PATH="$work/cuda-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  echo "source: $src ($mode)"
  echo "commit of the tree: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "--- nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi 2>&1 || true
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv 2>&1 || true
  else
    echo "(no nvidia-smi)"
  fi
  echo "--- libcuda (the driver's)"
  { ldconfig -p 2>/dev/null | grep 'libcuda\.so\.1' ; ls /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null; } || echo "(not found)"
  echo "--- nvcc"
  { command -v nvcc >/dev/null && nvcc --version | tail -2; } || { [[ -x /usr/local/cuda/bin/nvcc ]] && /usr/local/cuda/bin/nvcc --version | tail -2; } || echo "(no nvcc)"
  echo "--- CUDA libraries used (searched: ${dirs[*]})"
  printf '%s\n' "${cuda_found[@]}"
  ((${#cuda_missing[@]} == 0)) || echo "missing: ${cuda_missing[*]}"
  echo "--- glibc and libstdc++ of this machine"
  getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -1
  ldconfig -p 2>/dev/null | grep 'libstdc++\.so\.6 ' | head -2 || true
  echo "--- bundle"
  if [[ $mode == bundle && -f "$bundle/MANIFEST.json" ]]; then cat "$bundle/MANIFEST.json"; else echo "(a build folder: its libraries are this machine's)"; fi
  echo "--- python and PyTorch"
} >"$v" 2>&1
torch_ok=0 torch_why="" torch_version=""
if ((have_py)); then
  if torch_info=$(in_given_env timeout "$(cap 90)" "$py" -c '
import torch
print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), "nccl", ".".join(map(str, torch.cuda.nccl.version())))
' 2>&1); then
    echo "$torch_info" >>"$v"
    torch_version=$(head -1 <<<"$torch_info" | cut -d' ' -f1)
    if grep -q 'available True' <<<"$torch_info"; then torch_ok=1; else torch_why="PyTorch $torch_version sees no CUDA device"; fi
  else
    echo "$torch_info" >>"$v"
    torch_why="$py could not import torch"
  fi
else
  echo "(no $py)" >>"$v"
  torch_why="no $py"
fi

if command -v nvidia-smi >/dev/null; then
  q=$(timeout 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
  device_name=${q%%,*} driver=${q#*, }
  [[ -n "$q" ]] || driver=""
fi
glibc_here=$(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2 || true)
glibc_needed=""
if [[ $mode == bundle && -f "$bundle/MANIFEST.json" ]]; then
  glibc_needed=$(sed -n 's/.*"glibc_needed": "\([0-9.]*\)".*/\1/p' "$bundle/MANIFEST.json")
fi
if ((runnable)) && [[ -n "$glibc_needed" && -n "$glibc_here" ]] &&
   [[ $(printf '%s\n%s\n' "$glibc_needed" "$glibc_here" | sort -V | head -1) != "$glibc_needed" ]]; then
  runnable=0 why_not="the bundle needs glibc $glibc_needed, this machine has $glibc_here: build the bundle on an older system"
fi
if ((runnable)) && ((${#cuda_missing[@]})); then
  runnable=0 why_not="CUDA libraries not found on this machine: ${cuda_missing[*]} (FSDPC_CUDA_LIB_DIRS names more folders)"
fi
if ((runnable)); then
  if ! start_out=$(timeout "$(cap 60)" "$fsdpc" models 2>&1 >/dev/null); then
    runnable=0 why_not="fsdpc does not start: $(tail -3 <<<"$start_out")"
  fi
fi
cat "$v"
figs="{\"device\": $(js "$device_name"), \"driver\": $(js "$driver"), \"glibc\": $(js "$glibc_here"), \"torch\": $(js "$torch_version"), \"cuda_libraries\": ["
sep=""
for c in "${cuda_found[@]}"; do figs+="$sep$(js "$c")"; sep=", "; done
figs+="]}"
if ((runnable)); then record versions passed "" $(($(now) - s0)) "$figs"
else record versions failed "$why_not" $(($(now) - s0)) "$figs"; fi

# ---------------------------------------------------------------- 2 tests
say "2 tests: the GPU tests, at once"
s0=$(now)
stage_tests=(gpu_kernels_test gpu_nn_kernels_test gpu_nn_launch_test gpu_fusion_test gpu_train_test)
have_device=0 no_device=""
if command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then have_device=1; fi
if ((!runnable)); then
  record tests failed "not run: $why_not" 0
elif [[ ! -x "$tests/${stage_tests[0]}" ]]; then
  record tests skipped "the GPU tests are not built in $tests (a build without the CUDA toolkit)" 0
  no_device="the GPU tests are not built"
else
  c=$(cap 150)
  pids=()
  for t in "${stage_tests[@]}"; do
    (rc=0; timeout -k 5 "$c" "$tests/$t" >"$work/$t.log" 2>&1 || rc=$?; echo "$rc" >"$work/$t.rc") &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  figs="{" sep="" n_fail=0 n_pass=0 n_skip=0
  for t in "${stage_tests[@]}"; do
    rc=$(cat "$work/$t.rc")
    st=$(status_of "$rc")
    summary=$(grep -E '^(All tests passed|test cases:|SKIPPED:|kernel coverage:)' "$work/$t.log" | tail -2 | tr '\n' ' ')
    printf '%-22s %-8s exit %-3s %s\n' "$t" "$st" "$rc" "$summary"
    { echo "===== $t: $st (exit $rc)"; cat "$work/$t.log"; echo; } >>"$out/tests.log"
    figs+="$sep$(js "$t"): {\"status\": $(js "$st"), \"exit\": $rc, \"summary\": $(js "$summary")}"
    sep=", "
    case "$st" in passed) n_pass=$((n_pass + 1)) ;; skipped) n_skip=$((n_skip + 1)) ;; *) n_fail=$((n_fail + 1)) ;; esac
    if [[ $st != skipped ]]; then have_device=1; elif [[ -z "$no_device" ]]; then no_device=$(grep -m1 '^SKIPPED:' "$work/$t.log" | sed 's/^SKIPPED: //' | cut -c1-300 || true); fi
  done
  figs+="}"
  if ((n_fail)); then record tests failed "$n_fail of ${#stage_tests[@]} failed or timed out (tests.log)" $(($(now) - s0)) "$figs"
  elif ((n_pass == 0)); then record tests skipped "${no_device:-every test skipped}" $(($(now) - s0)) "$figs"
  else record tests passed "" $(($(now) - s0)) "$figs"; fi
fi
[[ -n "$no_device" ]] || no_device="no CUDA device is visible"

# ---------------------------------------------------------------- 3 nccl
say "3 nccl: collectives in a world of one"
s0=$(now)
nlog="$out/nccl.log"
: >"$nlog"
# losses FILE: the "loss" of each line of a --log-json file.
losses() { grep -o '"loss": [-0-9.e+naif]*' "$1" | awk '{print $2}'; }
# max_rel_diff A B: the largest relative difference between two runs' losses,
# step by step, or "steps N" when they do not both have 10.
max_rel_diff() {
  paste <(losses "$1") <(losses "$2") |
    awk 'NF == 2 { n++; d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r }
         END { if (n != 10) print "steps " n; else printf "%.3g\n", m }'
}
# train TAG ENV... -- ARGS...: fsdpc train of gpt2-tiny on the GPU, logged to nccl.log.
train_tiny() {
  local tag=$1 rc=0; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo "----- $tag: ${envs[*]} fsdpc train --model gpt2-tiny ... $*" >>"$nlog"
  env "${envs[@]}" timeout -k 5 "$(cap 60)" "$fsdpc" train --model gpt2-tiny --executor cuda --seq 32 --batch 8 --steps 10 \
    --optimizer adamw --lr 1e-3 --clip 1.0 --weight-decay 0.01 --seed 3 --timeout 60 --log-json "$work/$tag.jsonl" "$@" \
    >>"$nlog" 2>&1 || rc=$?
  echo "exit $rc" >>"$nlog"
  return "$rc"
}
if ((!runnable)); then
  record nccl failed "not run: $why_not" 0
elif ((!have_device)); then
  record nccl skipped "$no_device" 0
else
  problems=() figs="{" sep=""
  for t in gpu_nccl_test gpu_nccl_dim_test gpu_nccl_train_test; do
    rc=0
    timeout -k 5 "$(cap 60)" "$tests/$t" >"$work/$t.log" 2>&1 || rc=$?
    st=$(status_of "$rc")
    { echo "===== $t: $st (exit $rc)"; cat "$work/$t.log"; echo; } >>"$nlog"
    printf '%-22s %-8s exit %s\n' "$t" "$st" "$rc"
    figs+="$sep$(js "$t"): $(js "$st")"
    sep=", "
    [[ $st == passed || ($st == skipped && $t != gpu_nccl_test) ]] || problems+=("$t $st")
  done
  ok_f32=1
  train_tiny elided FSDPC_KEEP_COLLECTIVES=0 -- || { ok_f32=0; problems+=("gpt2-tiny f32 (collectives elided) failed"); }
  train_tiny kept FSDPC_KEEP_COLLECTIVES=1 FSDPC_NCCL_TIMING=1 -- || { ok_f32=0; problems+=("gpt2-tiny f32 with collectives kept failed"); }
  train_tiny kept-bf16 FSDPC_KEEP_COLLECTIVES=1 -- --precision bf16 || problems+=("gpt2-tiny bf16 with collectives kept failed")
  # The CUDA quantize/dequantize kernels and NCCL's int8 gather: within the
  # codes' rounding of the f32 gathers (int8_gathers_test's 0.2% on the CPU).
  if train_tiny kept-int8 FSDPC_KEEP_COLLECTIVES=1 -- --gather-dtype int8 --bucketing unit && ((ok_f32)); then
    d8=$(max_rel_diff "$work/kept.jsonl" "$work/kept-int8.jsonl")
    echo "losses, int8 gathers against f32 (collectives kept): max relative difference $d8" | tee -a "$nlog"
    figs+=", \"int8_vs_f32_max_rel\": $(js "$d8")"
    if [[ $d8 == steps* ]] || awk -v d="$d8" 'BEGIN { exit !(d > 2e-3) }'; then problems+=("int8 gathers' losses differ from f32's by $d8 (tolerance 2e-3)"); fi
  else
    problems+=("gpt2-tiny with int8 gathers (collectives kept) failed, or its f32 baseline did")
  fi
  if ((ok_f32)); then
    diff=$(max_rel_diff "$work/elided.jsonl" "$work/kept.jsonl")
    echo "losses, collectives kept against elided: max relative difference $diff" | tee -a "$nlog"
    figs+=", \"kept_vs_elided_max_rel\": $(js "$diff")"
    if [[ $diff == steps* ]] || awk -v d="$diff" 'BEGIN { exit !(d > 1e-5) }'; then problems+=("losses kept vs elided differ: $diff (tolerance 1e-5)"); fi
    colls=$(tail -1 "$work/kept.jsonl" | grep -E -o '"collectives": \{("[a-z_]+": \{[^}]*\}(, )?)*\}' | head -1 || true)
    [[ -n "$colls" ]] && figs+=", ${colls}"
    echo "collectives of the last step (kept): ${colls:-none logged}" | tee -a "$nlog"
    if [[ -z "$colls" ]]; then problems+=("no collectives logged with FSDPC_KEEP_COLLECTIVES=1"); fi
  fi
  [[ -f "$work/kept-bf16.jsonl" ]] && figs+=", \"bf16_losses\": [$(losses "$work/kept-bf16.jsonl" | paste -sd, | sed 's/,/, /g')]"
  figs+="}"
  if ((${#problems[@]})); then record nccl failed "$(IFS=';'; echo "${problems[*]}")" $(($(now) - s0)) "$figs"
  else record nccl passed "" $(($(now) - s0)) "$figs"; fi
fi

# ---------------------------------------------------------------- 4 bench
say "4 bench: bench/gpu/run.sh, bf16"
s0=$(now)
blog="$out/bench.log"
: >"$blog"
declare -A fsdpc_ms=()
if ((!runnable)); then
  record bench failed "not run: $why_not" 0
elif ((!have_device)); then
  record bench skipped "$no_device" 0
else
  lines=() problems=()
  for m in gpt2 gpt2-medium; do
    c=$(cap 100)
    if ((c < 20)); then problems+=("$m not run: out of time"); continue; fi
    rc=0
    echo "----- MODELS=$m bench/gpu/run.sh (cap ${c}s)" >>"$blog"
    line=$(MODELS=$m FSDPC_BIN="$fsdpc" timeout -k 5 "$c" bash "$root/bench/gpu/run.sh" 2>>"$blog") || rc=$?
    echo "$line" | tee -a "$blog"
    echo "exit $rc" >>"$blog"
    if ((rc == 0)) && [[ $line == \{* ]]; then
      lines+=("$line")
      fsdpc_ms[$m]=$(grep -o '"step_ms": [0-9.]*' <<<"$line" | awk '{print $2}')
    else
      problems+=("$m $(status_of "$rc") (exit $rc)")
    fi
  done
  figs="[$(IFS=,; echo "${lines[*]}")]"
  if ((${#problems[@]})); then record bench failed "$(IFS=';'; echo "${problems[*]}") (bench.log)" $(($(now) - s0)) "$figs"
  else record bench passed "" $(($(now) - s0)) "$figs"; fi
fi

# ---------------------------------------------------------------- 5 torch
say "5 torch: PyTorch on the same GPU, models, batch and precision"
s0=$(now)
tlog="$out/torch.log"
: >"$tlog"
if ((!torch_ok)); then
  record torch skipped "$torch_why" 0
else
  declare -A torch_ms=()
  lines=() problems=()
  for mode in eager fsdp2 compile; do
    for m in gpt2 gpt2-medium; do
      c=$(cap 100)
      if ((c < 20)); then problems+=("$mode $m not run: out of time"); continue; fi
      rc=0
      echo "----- torch_gpu_step.py --model $m --mode $mode (cap ${c}s)" >>"$tlog"
      line=$(PYTHONUNBUFFERED=1 in_given_env timeout -k 5 "$c" "$py" "$root/bench/gpu/torch_gpu_step.py" --model "$m" --mode "$mode" 2>>"$tlog" | tail -1) || rc=$?
      echo "$line" | tee -a "$tlog"
      if ((rc == 0)) && [[ $line == \{* ]]; then
        lines+=("$line")
        torch_ms[$mode.$m]=$(grep -o '"step_ms": [0-9.]*' <<<"$line" | awk '{print $2}')
      else
        problems+=("$mode $m $(status_of "$rc") (exit $rc)")
      fi
    done
  done
  # PyTorch's step over fsdpc's: above 1, fsdpc is the faster.
  ratios="{" sep=""
  printf '\n%-12s %10s %10s %10s %10s   %s\n' model fsdpc_ms eager_ms fsdp2_ms compile_ms "torch/fsdpc (eager fsdp2 compile)"
  for m in gpt2 gpt2-medium; do
    f=${fsdpc_ms[$m]:-} r="" rj="{\"fsdpc_ms\": ${f:-null}"
    for mode in eager fsdp2 compile; do
      tm=${torch_ms[$mode.$m]:-}
      rj+=", \"${mode}_ms\": ${tm:-null}"
      if [[ -n "$f" && -n "$tm" ]]; then
        q=$(awk -v a="$tm" -v b="$f" 'BEGIN { printf "%.2f", a / b }')
        rj+=", \"${mode}_over_fsdpc\": $q"
        r+=" $q"
      else
        r+=" -"
      fi
    done
    rj+="}"
    printf '%-12s %10s %10s %10s %10s  %s\n' "$m" "${f:--}" "${torch_ms[eager.$m]:--}" "${torch_ms[fsdp2.$m]:--}" "${torch_ms[compile.$m]:--}" "$r"
    ratios+="$sep\"$m\": $rj"
    sep=", "
  done
  ratios+="}"
  figs="{\"runs\": [$(IFS=,; echo "${lines[*]}")], \"ratios\": $ratios}"
  if ((${#problems[@]})); then record torch failed "$(IFS=';'; echo "${problems[*]}") (torch.log)" $(($(now) - s0)) "$figs"
  else record torch passed "" $(($(now) - s0)) "$figs"; fi
fi

say "done in $(now) s: $out/summary.json"
for s in "${stages[@]}"; do
  sed -n 's/.*"stage": "\([^"]*\)", "status": "\([^"]*\)", "reason": "\([^"]*\)", "seconds": \([0-9]*\).*/  \1: \2 (\4 s) \3/p' <<<"$s"
done
exit "$failed"

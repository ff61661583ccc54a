#!/usr/bin/env bash
# The Quick start's main job as a user runs it (tools/main_job.sh on the built
# tree), and its failure path: a step that fails must be named, with its exit
# status, and must not pass for success.
# Usage: test/quickstart_test.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "quickstart_test: FAIL: $*" >&2; exit 1; }

# 1. The real job: every stage must have happened, and the exit status be 0.
bash "$root/tools/main_job.sh" "$build" "$work/ckpt" > "$work/out.txt" 2>&1
rc=$?
cat "$work/out.txt"
((rc == 0)) || fail "main job exited with $rc"
grep -q "all_gather(" "$work/out.txt" || fail "no forward all_gather printed"
grep -Eq "^step +399 +loss [0-9.]+ +val [0-9.]+" "$work/out.txt" || fail "training did not reach step 399 with a val loss"
[[ -s $work/ckpt/model.safetensors && -s $work/ckpt/config.json ]] || fail "no checkpoint in $work/ckpt"
grep -q "^== quickstart: done$" "$work/out.txt" || fail "no closing line"

# 2. A failing step: a stand-in fsdpc that writes half a trace and dies as the
# old pipeline's fsdpc did (SIGPIPE). The job must stop, name the step, and
# exit non-zero without printing success.
mkdir -p "$work/fake/tools"
cat > "$work/fake/tools/fsdpc" <<'FAKE'
#!/usr/bin/env bash
echo "def forward(x):"
kill -PIPE $$
FAKE
chmod +x "$work/fake/tools/fsdpc"
bash "$root/tools/main_job.sh" "$work/fake" "$work/ckpt2" > "$work/fail.txt" 2>&1
rc=$?
cat "$work/fail.txt"
((rc != 0)) || fail "a dying fsdpc dump went unnoticed (exit 0)"
grep -q "quickstart: FAILED (exit $rc) while: fsdpc dump" "$work/fail.txt" || fail "the failing step was not named"
grep -q "quickstart: done" "$work/fail.txt" && fail "success printed after a failure"

# 3. No build: a clear message, exit 2.
bash "$root/tools/main_job.sh" "$work" > "$work/nobuild.txt" 2>&1
rc=$?
((rc == 2)) || fail "a missing build exited with $rc, expected 2"
grep -q "is missing (build first" "$work/nobuild.txt" || fail "no message for a missing build"
echo "quickstart_test: all 3 checks hold"

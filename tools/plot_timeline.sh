#!/usr/bin/env bash
# Renders one step of an `fsdpc train --profile` trace as a PNG: per rank,
# the step's phases, the compute track (matmul kernels apart from the rest,
# collective issues and long MPI polls marked), the time blocked in waits, and each
# communication lane (collectives from issue to completion).
#
#   tools/plot_timeline.sh TRACE.json [STEP] [OUT.png]
#
# STEP defaults to the first profiled step, OUT to docs/timeline.png. Needs
# jq and gnuplot (Debian: apt-get install jq gnuplot-nox); not run by CI.
set -euo pipefail

trace=${1:?usage: tools/plot_timeline.sh TRACE.json [STEP] [OUT.png]}
step=${2:-}
out=${3:-docs/timeline.png}
for tool in jq gnuplot; do
  command -v "$tool" >/dev/null || { echo "plot_timeline.sh: needs $tool (apt-get install jq gnuplot-nox)" >&2; exit 2; }
done
[[ -r $trace ]] || { echo "plot_timeline.sh: cannot read $trace" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ -z $step ]]; then
  step=$(jq -r '[.traceEvents[] | select(.ph=="X" and .cat=="step" and (.name|startswith("step ")))
                 | .name | ltrimstr("step ") | tonumber] | min // empty' "$trace")
  [[ -n $step ]] || { echo "plot_timeline.sh: $trace has no step spans" >&2; exit 2; }
fi

# Rows, top to bottom per rank: phases, compute, wait, then the lanes, with
# the threads' names as labels; boxes in milliseconds from the step's start
# (the earliest rank's).
jq -r --arg step "step $step" '
  .traceEvents as $ev
  | ([$ev[] | select(.ph=="X" and .cat=="step" and .name==$step)]) as $spans
  | if ($spans|length)==0 then error("no span named \($step)") else . end
  | ($spans | map(.ts) | min) as $t0
  | ($spans | map(.ts + .dur) | max) as $t1
  | ([$ev[] | select(.ph=="M" and .name=="thread_name") | {pid, tid, name: .args.name}]
     | sort_by(.pid, .tid)) as $threads
  | ($threads | map(.pid) | unique) as $pids
  | [ $threads | to_entries[] | .value + {row: (.key + (.value.pid as $p | $pids | index($p)))} ] as $rows
  | ($rows | map(.row) | max) as $last
  | def row($pid; $tid): ($rows[] | select(.pid==$pid and .tid==$tid) | $last - .row);
    def colour:  # 0xRRGGBB as a number, for the lc rgb variable of gnuplot
      if .cat=="matmul" then 3895222
      elif .cat=="compute" then 8368233
      elif .cat=="issue" then 15113984
      elif .cat=="communication" then 10181046
      elif .cat=="wait" then 14034728
      elif .cat=="progress" then 12303291
      elif .name=="forward" then 13228528
      elif .name=="backward" then 16112816
      elif .name=="optimizer" then 11066838
      else 14540253 end;
  ( $ev[] | select(.ph=="X" and .ts >= $t0 and .ts + .dur <= $t1 and (.name|startswith("step ")|not))
    | [((.ts - $t0)/1000), ((.ts + .dur - $t0)/1000), row(.pid; .tid), colour] | @tsv ),
  ( $rows[] | "#label\t\($last - .row)\trank \(.pid) \(.name)" ),
  "#range\t\(($t1 - $t0)/1000)\t\($last)"
' "$trace" > "$work/all.tsv"

grep -v '^#' "$work/all.tsv" > "$work/boxes.tsv" || true
ytics=$(awk -F'\t' '$1=="#label" { printf "%s\"%s\" %s", (n++ ? ", " : ""), $3, $2 }' "$work/all.tsv")
range=$(awk -F'\t' '$1=="#range" { print $2 }' "$work/all.tsv")
rows=$(awk -F'\t' '$1=="#label" { n++ } END { print n }' "$work/all.tsv")
top=$(awk -F'\t' '$1=="#range" { print $3 }' "$work/all.tsv")
height=$((120 + 26 * rows))

gnuplot <<EOF
set terminal pngcairo size 1400,${height} font "DejaVu Sans,10"
set output "${out}"
set title "fsdpc train --profile: step ${step} on every rank ($(basename "$trace"))"
set xlabel "ms since the step began"
set xrange [0:${range}]
set yrange [-0.7:${top}+0.7]
set ytics (${ytics}) nomirror
set grid xtics
set key outside right top
set style fill solid 1.0 noborder
plot "$work/boxes.tsv" using 1:3:1:2:(\$3-0.38):(\$3+0.38):4 with boxxyerror lc rgb variable notitle, \
     keyentry with boxes lc rgb "#3b6fb6" title "matmul", \
     keyentry with boxes lc rgb "#7fb069" title "other compute", \
     keyentry with boxes lc rgb "#e69f00" title "collective issue", \
     keyentry with boxes lc rgb "#9b59b6" title "collective in flight", \
     keyentry with boxes lc rgb "#d62728" title "blocked in wait", \
     keyentry with boxes lc rgb "#bbbbbb" title "polling MPI", \
     keyentry with boxes lc rgb "#c9d9f0" title "forward", \
     keyentry with boxes lc rgb "#f5dcb0" title "backward", \
     keyentry with boxes lc rgb "#a8ddd6" title "optimizer"
EOF
echo "wrote $out (step $step)"

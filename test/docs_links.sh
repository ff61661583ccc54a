#!/usr/bin/env bash
# Checks the documentation's links: bash test/docs_links.sh ROOT
#
# Fails (exit 1), naming the file, the line and the link, when
#   - README.md is longer than 250 lines (it is the front page; the rest
#     lives in docs/);
#   - a relative link in README.md or docs/*.md, [text](path) or
#     ![alt](path) or a [ref]: path definition, names a file or folder that
#     does not exist (relative to the page that links it);
#   - its #anchor matches no heading of the target page (the page itself for
#     a bare #anchor). Anchors follow GitHub's rule: the heading's text,
#     lower-cased, with every character but letters, digits, '_', '-' and
#     spaces dropped, spaces turned into '-', and "-1", "-2", ... added to
#     repeated headings;
#   - http://, https:// or mailto: appears outside a code block or an inline
#     code span: the docs never link outside the repository.
# Fenced code blocks (``` or ~~~) and inline code spans are not scanned for
# links, and their '#' lines are not headings. Headings are ATX headings
# ('# ...'); the docs use no underlined (setext) ones. Exit 2 on a usage
# error. Needs only bash, awk, sed and grep.
set -euo pipefail
export LC_ALL=C.UTF-8  # letters beyond ASCII count as letters in anchors

max_readme_lines=250

if (($# != 1)) || [[ ! -d $1 ]]; then
  echo "usage: bash test/docs_links.sh ROOT  (ROOT: the repository's top folder)" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
cd "$root"

failures=0
fail() {  # FILE LINE MESSAGE
  echo "$1:$2: $3"
  failures=$((failures + 1))
}

# Markdown with fenced code blocks blanked (line numbers kept) and inline
# code spans removed: what remains is prose, headings and links.
prose() {
  awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; print ""; next }
    fenced { print ""; next }
    {
      line = $0
      gsub(/``([^`]|`[^`])+``/, "", line)
      gsub(/`[^`]*`/, "", line)
      print line
    }' "$1"
}

# anchor_cache[FILE]: the anchors of FILE's headings, one a line, in order.
declare -A anchor_cache=()
load_anchors() {
  local file=$1
  if [[ -z ${anchor_cache[$file]+set} ]]; then
    anchor_cache[$file]=$(
      awk '
        /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
        # An ATX heading: at most 3 spaces, 1 to 6 #s, then a blank or the end
        # (mawk has no {m,n}, so the counts are checked by hand).
        !fenced && match($0, /^ *#+/) && index($0, "#") <= 4 && RLENGTH - index($0, "#") < 6 &&
          substr($0, RLENGTH + 1, 1) ~ /^([ \t]|)$/ {
          h = $0
          sub(/^ *#+[ \t]*/, "", h)
          sub(/[ \t]+#+[ \t]*$/, "", h)
          gsub(/\]\([^)]*\)/, "]", h)  # [text](target) reads as its text
          print h
        }' "$file" |
        sed -E 's/.*/\L&/; s/[^[:alnum:]_ -]//g; s/ /-/g' |
        awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
    )
  fi
}

has_anchor() {  # FILE ANCHOR (a here-string: grep -q ending a pipe early would trip pipefail)
  load_anchors "$1"
  grep -qxF -- "$2" <<<"${anchor_cache[$1]}"
}

check_page() {
  local page=$1 dir lineno target path anchor resolved
  dir=$(dirname "$page")
  # "LINE<TAB>TARGET" for every link; "LINE<TAB>!URL" for text that links out.
  while IFS=$'\t' read -r lineno target; do
    if [[ $target == '!'* ]]; then
      fail "$page" "$lineno" "external link not allowed outside a code block: ${target#!}"
      continue
    fi
    target=${target#<}
    target=${target%>}
    [[ -z $target ]] && { fail "$page" "$lineno" "empty link target"; continue; }
    case $target in
      http://* | https://* | mailto:*) continue ;;  # reported by the '!' line
    esac
    path=${target%%#*}
    anchor=
    [[ $target == *'#'* ]] && anchor=${target#*#}
    if [[ -z $path ]]; then
      resolved=$page
    else
      resolved=$dir/$path
      resolved=${resolved#./}
      if [[ ! -e $resolved ]]; then
        fail "$page" "$lineno" "broken link: $target ($resolved does not exist)"
        continue
      fi
    fi
    if [[ -n $anchor ]]; then
      if [[ ! -f $resolved || $resolved != *.md ]]; then
        fail "$page" "$lineno" "anchor on a file that is not a markdown page: $target"
      elif ! has_anchor "$resolved" "$anchor"; then
        fail "$page" "$lineno" "broken anchor: $target (no heading of $resolved has the anchor #$anchor)"
      fi
    fi
  done < <(
    prose "$page" | awk '
      {
        line = $0
        rest = line
        while (match(rest, /(https?:\/\/|mailto:)[^ )>\]]*/)) {
          print NR "\t!" substr(rest, RSTART, RLENGTH)
          rest = substr(rest, RSTART + RLENGTH)
        }
        if (match(line, /^ *\[[^]]+\]:[ \t]+[^ \t]+/) && index(line, "[") <= 4) {
          def = substr(line, RSTART, RLENGTH)
          sub(/^ *\[[^]]+\]:[ \t]+/, "", def)
          print NR "\t" def
        }
        while (match(line, /\]\([^)]*\)/)) {
          t = substr(line, RSTART + 2, RLENGTH - 3)
          sub(/^[ \t]+/, "", t)
          sub(/[ \t].*$/, "", t)  # drop a "title"
          print NR "\t" t
          line = substr(line, RSTART + RLENGTH)
        }
      }'
  )
}

if [[ ! -f README.md ]]; then
  echo "README.md:0: README.md is missing"
  exit 1
fi
readme_lines=$(awk 'END { print NR }' README.md)
if ((readme_lines > max_readme_lines)); then
  fail README.md "$readme_lines" "README.md has $readme_lines lines; the front page holds at most $max_readme_lines (move the rest to docs/)"
fi

for page in README.md docs/*.md; do
  if [[ -f $page ]]; then check_page "$page"; fi
done

if ((failures > 0)); then
  echo "docs_links: $failures problem(s)" >&2
  exit 1
fi
echo "docs_links: README.md ($readme_lines lines) and docs/*.md: every link resolves"

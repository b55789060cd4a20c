#!/bin/sh
# No function over 80 lines outside tests/ (STYLE.md: functions short enough
# to read at once).
#
#   scripts/check-functions.sh [ALLOW_FILE] [MAX_LINES]
#
# Universal Ctags (Debian's universal-ctags; scripts/deps.sh) lists every
# function definition of the libraries, tools/, examples/ and include/ in
# C, C++ and CUDA with its first and last line; a function's length is
# last - first + 1, counted from the line holding its name to its closing
# brace. ALLOW_FILE (default scripts/function-allow.txt) lists temporary
# exceptions, "PATH FUNCTION" a line with # comments naming the branch that
# shortens them; an entry whose function is gone or now short enough is
# reported as stale, so the list only shrinks. Exits 1 listing each long
# function, 2 when ctags is missing or not Universal Ctags.
cd "$(dirname "$0")/.." || exit 2
allow="${1:-scripts/function-allow.txt}"
max="${2:-80}"
[ -r "$allow" ] || { echo "check-functions: cannot read $allow" >&2; exit 2; }
ctags=$(command -v ctags-universal || command -v ctags) ||
  { echo "check-functions: ctags not found (apt-get install universal-ctags; make deps)" >&2; exit 2; }
"$ctags" --version 2>/dev/null | grep -q 'Universal Ctags' ||
  { echo "check-functions: $ctags is not Universal Ctags (apt-get install universal-ctags)" >&2; exit 2; }

tmp=$(mktemp "${TMPDIR:-/tmp}/check-functions.XXXXXX") || exit 2
trap 'rm -f "$tmp" "$tmp.long" "$tmp.out" "$tmp.out.allow"' EXIT INT TERM
find libtensafe-*/src tools examples include -type f \
     \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) |
  sort |
  "$ctags" -L - -x --_xformat='%{input} %{line} %{end} %{name}' --languages=C,C++,CUDA \
    --langmap=C++:+.h --kinds-C=f --kinds-C++=f --kinds-CUDA=f > "$tmp" 2>/dev/null ||
  { echo "check-functions: ctags failed" >&2; exit 2; }
[ -s "$tmp" ] || { echo "check-functions: ctags found no function" >&2; exit 2; }

awk -v max="$max" '$3 != "" && $3 - $2 + 1 > max { print $1, $4, $3 - $2 + 1, $2 }' "$tmp" |
  sort -u > "$tmp.long"

grep -v '^[[:space:]]*#' "$allow" | awk 'NF >= 2' > "$tmp.out.allow" 2>/dev/null
: > "$tmp.out"
while read -r file fn lines line; do
  if awk -v a="$file" -v b="$fn" '$1 == a && $2 == b { hit = 1 } END { exit !hit }' "$tmp.out.allow"; then
    continue
  fi
  echo "$file:$line: $fn is $lines lines (limit $max): split it into named helpers" >> "$tmp.out"
done < "$tmp.long"
while read -r file fn _; do
  awk -v a="$file" -v b="$fn" '$1 == a && $2 == b { hit = 1 } END { exit !hit }' "$tmp.long" ||
    echo "$allow: stale entry '$file $fn' (gone or now <= $max lines: remove it)" >> "$tmp.out"
done < "$tmp.out.allow"
rm -f "$tmp.out.allow"

if [ -s "$tmp.out" ]; then
  cat "$tmp.out"
  echo "check-functions: $(wc -l < "$tmp.out" | tr -d ' ') problem(s)"
  exit 1
fi
echo "check-functions: $(wc -l < "$tmp" | tr -d ' ') functions; the $(wc -l < "$tmp.long" | tr -d ' ') over $max lines are allow-listed in $allow"

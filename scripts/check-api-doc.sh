#!/bin/sh
# Keeps docs/API.md in sync with the public headers and the libraries.
#
#   scripts/check-api-doc.sh [LIBDIR] [API_MD] [INCLUDE_DIR]
#
# LIBDIR (default build/lib) holds the built libtensafe-*.so.*; API_MD
# defaults to docs/API.md and INCLUDE_DIR to include/tensafe next to this
# script. Fails (exit 1), listing each problem, when
#   - an exported function (nm -D, defined text symbols) is not named in
#     API_MD as a whole word;
#   - a function a header declares with TSAFE_API has no code span in
#     API_MD holding its exact signature (return type, name, parameter
#     types and names, compared after whitespace is normalised: write it as
#     the header does, `- \`tsafe_status tsafe_x(const T *a, int b)\``);
#   - a code span in API_MD that reads as a signature (a return type before
#     tsafe_name(...)) matches no header declaration;
#   - a code span names a function, `tsafe_x(`, that no header declares.
# Exit 2 when nothing can be checked.
libdir="${1:-build/lib}"
here=$(cd "$(dirname "$0")" && pwd)
doc="${2:-$here/../docs/API.md}"
incdir="${3:-$here/../include/tensafe}"

set -- "$libdir"/libtensafe-*.so.*
[ -e "$1" ] || { echo "check-api-doc: no $libdir/libtensafe-*.so.* (run make libs)" >&2; exit 2; }
[ -r "$doc" ] || { echo "check-api-doc: cannot read $doc" >&2; exit 2; }
[ -d "$incdir" ] || { echo "check-api-doc: no header directory $incdir" >&2; exit 2; }
command -v nm >/dev/null 2>&1 || { echo "check-api-doc: nm not found" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-api-doc.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

# The .so, .so.MAJOR and .so.MAJOR.MINOR.PATCH names are one file: sort -u.
for so in "$@"; do
  nm -D --defined-only "$so" || { echo "check-api-doc: nm failed on $so" >&2; exit 2; }
done | awk '$2 == "T" { print $3 }' | sort -u > "$tmp/exported"
total=$(wc -l < "$tmp/exported" | tr -d ' ')
[ "$total" -gt 0 ] || { echo "check-api-doc: no exported function found in $libdir" >&2; exit 2; }

: > "$tmp/missing"
while IFS= read -r sym; do
  grep -qw -- "$sym" "$doc" || echo "$sym" >> "$tmp/missing"
done < "$tmp/exported"

# Signatures. norm: one space between tokens, none inside () next to the
# parentheses or before a comma, pointer stars bound to the name.
norm() {
  sed -E 's/[[:space:]]+/ /g; s/\( /(/g; s/ \)/)/g; s/ ,/,/g; s/\* /*/g; s/^ //; s/ $//; s/;$//'
}
# every TSAFE_API declaration of the headers, joined onto one line
for h in "$incdir"/*.h; do
  awk '/^[[:space:]]*#/ { next }
       /TSAFE_API/ { collect = 1; buf = "" }
       collect { buf = buf " " $0 }
       collect && /;/ { print buf; collect = 0 }' "$h"
done | sed -E 's/TSAFE_API//; s/TSAFE_NODISCARD//' | norm | sort -u > "$tmp/hdr_sigs"
sed -E 's/^.*[ *](tsafe_[A-Za-z0-9_]+)\(.*$/\1/' "$tmp/hdr_sigs" | sort -u > "$tmp/declared"
# every code span of the document (single backticks; a span never spans lines)
grep -o '`[^`]*`' "$doc" | sed 's/`//g' | norm | sort -u > "$tmp/spans"
grep -E '^[A-Za-z_][A-Za-z0-9_ ]*[ *]tsafe_[A-Za-z0-9_]+\(.*\)$' "$tmp/spans" > "$tmp/doc_sigs"
: > "$tmp/sig_problems"
comm -23 "$tmp/hdr_sigs" "$tmp/doc_sigs" | while IFS= read -r sig; do
  name=$(printf '%s\n' "$sig" | sed -E 's/^.*[ *](tsafe_[A-Za-z0-9_]+)\(.*$/\1/')
  other=$(grep -E "[ *]$name\(" "$tmp/doc_sigs" | head -n 1)
  if [ -n "$other" ]; then
    printf '  %s\n    header: %s\n    doc:    %s\n' "$name" "$sig" "$other"
  else
    printf '  %s: no signature in the document (header: %s)\n' "$name" "$sig"
  fi
done >> "$tmp/sig_problems"
comm -13 "$tmp/hdr_sigs" "$tmp/doc_sigs" | while IFS= read -r sig; do
  name=$(printf '%s\n' "$sig" | sed -E 's/^.*[ *](tsafe_[A-Za-z0-9_]+)\(.*$/\1/')
  grep -qxF "$name" "$tmp/declared" ||
    printf '  %s: documented as `%s`, declared in no header\n' "$name" "$sig"
done >> "$tmp/sig_problems"
# names called in code spans (`tsafe_x(...)`, or a signature) that no header declares
grep -oE '(^|[^A-Za-z0-9_])tsafe_[A-Za-z0-9_]+[[:space:]]*\(' "$tmp/spans" |
  sed -E 's/^[^t]//; s/[[:space:]]*\($//' | sort -u > "$tmp/named"
comm -23 "$tmp/named" "$tmp/declared" | sed 's/^/  /; s/$/: named in a code span, declared in no header/' \
  >> "$tmp/sig_problems"
sigs_total=$(wc -l < "$tmp/hdr_sigs" | tr -d ' ')
if [ -s "$tmp/sig_problems" ]; then
  echo "check-api-doc: $(basename "$doc") against the headers of $incdir:"
  cat "$tmp/sig_problems"
  echo "check-api-doc: $(grep -c '^  tsafe_' "$tmp/sig_problems") signature problem(s) among $sigs_total declared functions"
  sig_fail=1
else
  sig_fail=0
fi

if [ -s "$tmp/missing" ]; then
  echo "check-api-doc: exported but not documented in $doc:"
  sed 's/^/  /' "$tmp/missing"
  echo "check-api-doc: $(wc -l < "$tmp/missing" | tr -d ' ') of $total exported functions undocumented"
  exit 1
fi
[ "$sig_fail" -eq 0 ] || exit 1
echo "api doc: $total exported functions, all documented; $sigs_total header signatures, all in the document as declared"

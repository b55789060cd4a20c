#!/bin/sh
# Keeps docs/API.md in sync with what the shared libraries export.
#
#   scripts/check-api-doc.sh [LIBDIR] [API_MD]
#
# LIBDIR (default build/lib) holds the built libtensafe-*.so.*; API_MD
# defaults to docs/API.md next to this script. Every exported function
# (nm -D, defined text symbols) must appear in API_MD as a whole word:
# the missing ones are listed and the exit status is 1. Functions that
# API_MD names in a code span (`name(`) but no library exports are listed
# as a warning only (the CUDA library is absent from builds without nvcc
# and from sanitizer builds). Exit 2 when nothing can be checked.
libdir="${1:-build/lib}"
here=$(cd "$(dirname "$0")" && pwd)
doc="${2:-$here/../docs/API.md}"

set -- "$libdir"/libtensafe-*.so.*
[ -e "$1" ] || { echo "check-api-doc: no $libdir/libtensafe-*.so.* (run make libs)" >&2; exit 2; }
[ -r "$doc" ] || { echo "check-api-doc: cannot read $doc" >&2; exit 2; }
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

# Reverse check: identifiers called in code spans, `tsafe_x(...)` or
# `... tsafe_x(` in a signature. Fenced blocks (```) contribute nothing.
grep -o '`[^`]*`' "$doc" | grep -oE '(^|[^A-Za-z0-9_])tsafe_[A-Za-z0-9_]+[[:space:]]*\(' |
  sed -E 's/^[^t]//; s/[[:space:]]*\($//' | sort -u > "$tmp/named"
comm -23 "$tmp/named" "$tmp/exported" > "$tmp/extra"
if [ -s "$tmp/extra" ]; then
  echo "check-api-doc: warning: named in $(basename "$doc") but not exported by $libdir:"
  sed 's/^/  /' "$tmp/extra"
fi

if [ -s "$tmp/missing" ]; then
  echo "check-api-doc: exported but not documented in $doc:"
  sed 's/^/  /' "$tmp/missing"
  echo "check-api-doc: $(wc -l < "$tmp/missing" | tr -d ' ') of $total exported functions undocumented"
  exit 1
fi
echo "api doc: $total exported functions, all documented"

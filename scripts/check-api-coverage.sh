#!/bin/sh
# Checks that every function the shared libraries export (nm -D, defined
# text symbols named tsafe_*) has a NULL/out-of-range case in
# tests/test_api_null.c (its name appears there as a whole word).
#   scripts/check-api-coverage.sh [LIBDIR] [TEST_FILE]
# LIBDIR defaults to build/lib; exits 1 listing the uncovered symbols,
# 2 when no shared library is found.
libdir="${1:-build/lib}"
test_file="${2:-tests/test_api_null.c}"
set -- "$libdir"/libtensafe-*.so
[ -e "$1" ] || { echo "check-api-coverage: no $libdir/libtensafe-*.so (run make libs)" >&2; exit 2; }
[ -r "$test_file" ] || { echo "check-api-coverage: cannot read $test_file" >&2; exit 2; }
syms=$(for so in "$@"; do nm -D --defined-only "$so"; done |
       awk '$2 == "T" && $3 ~ /^tsafe_/ { print $3 }' | sort -u)
total=0; missing=""
for s in $syms; do
  total=$((total + 1))
  grep -qw "$s" "$test_file" || missing="$missing $s"
done
if [ -n "$missing" ]; then
  echo "check-api-coverage: exported but not covered by $test_file:"
  for s in $missing; do echo "  $s"; done
  exit 1
fi
echo "check-api-coverage: all $total exported tsafe_* functions covered"

#!/bin/sh
# Checks that every function the shared libraries export (nm -D, defined
# text symbols named tsafe_*) has a NULL/out-of-range case in one of the
# tests/test_api_null_<header>.c suites (its name appears there as a whole
# word).
#   scripts/check-api-coverage.sh [LIBDIR] [TEST_FILE...]
# LIBDIR defaults to build/lib, the test files to tests/test_api_null_*.c;
# exits 1 listing the uncovered symbols, 2 when no shared library is found.
libdir="${1:-build/lib}"
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- tests/test_api_null_*.c
test_files="$*"
for t in $test_files; do
  [ -r "$t" ] || { echo "check-api-coverage: cannot read $t" >&2; exit 2; }
done
set -- "$libdir"/libtensafe-*.so
[ -e "$1" ] || { echo "check-api-coverage: no $libdir/libtensafe-*.so (run make libs)" >&2; exit 2; }
syms=$(for so in "$@"; do nm -D --defined-only "$so"; done |
       awk '$2 == "T" && $3 ~ /^tsafe_/ { print $3 }' | sort -u)
all=$(mktemp "${TMPDIR:-/tmp}/check-api-coverage.XXXXXX") || exit 2
trap 'rm -f "$all"' EXIT INT TERM
# shellcheck disable=SC2086 # the file list splits on purpose
cat $test_files > "$all"
total=0; missing=""
for s in $syms; do
  total=$((total + 1))
  grep -qw "$s" "$all" || missing="$missing $s"
done
if [ -n "$missing" ]; then
  echo "check-api-coverage: exported but not covered by tests/test_api_null_*.c:"
  for s in $missing; do echo "  $s"; done
  exit 1
fi
echo "check-api-coverage: all $total exported tsafe_* functions covered"

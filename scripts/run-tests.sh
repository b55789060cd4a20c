#!/bin/sh
# Runs every test binary in $1 (optionally only names containing $2), prints
# each cmocka summary, then one closing line; exits non-zero if any failed.
dir="$1"; filter="$2"
[ -d "$dir" ] || { echo "usage: $0 TEST_DIR [FILTER]  (no such directory: '$dir')" >&2; exit 2; }
src="$(cd "$(dirname "$0")/.." && pwd)/tests"
pass=0; fail=0; failed=""
for t in "$dir"/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *.o|*.d) continue;; esac
  name=$(basename "$t")
  # a binary whose source is gone (a renamed or split suite) is stale: an
  # old build tree must not run it
  if [ ! -e "$src/$name.c" ]; then echo "=== $name: stale (no tests/$name.c), skipped"; continue; fi
  if [ -n "$filter" ]; then  # space-separated substrings: run if any matches
    hit=0
    for f in $filter; do case "$name" in *"$f"*) hit=1;; esac; done
    [ "$hit" = 1 ] || continue
  fi
  echo "=== $name"
  if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $name"; fi
done
echo "suites: $pass passed, $fail failed"
[ $((pass+fail)) -gt 0 ] || { echo "no test suites found in $dir${filter:+ matching '$filter'}" >&2; exit 1; }
[ "$fail" -eq 0 ] || { echo "failed suites:$failed"; exit 1; }

#!/bin/sh
# Runs every test binary in $1 (optionally only names containing $2), prints
# each cmocka summary, then one closing line; exits non-zero if any failed.
dir="$1"; filter="$2"
pass=0; fail=0; failed=""
for t in "$dir"/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *.o|*.d) continue;; esac
  name=$(basename "$t")
  [ -n "$filter" ] && case "$name" in *"$filter"*) ;; *) continue;; esac
  echo "=== $name"
  if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $name"; fi
done
echo "test suites: $pass passed, $fail failed"
[ "$fail" -eq 0 ] || { echo "failed suites:$failed"; exit 1; }

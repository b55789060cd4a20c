#!/bin/sh
# Runs each libFuzzer target for SECONDS with its dictionary and seed corpus
# and keeps the log readable: the fuzzer's own output (progress lines, the
# recommended-dictionary dump) goes to FUZZ_BUILD/logs/<target>.log, and this
# prints one line per target; for a target that fails, the reproducer's path
# and the last lines of its log. Every target runs; exits 1 if any failed.
#
#   usage: scripts/fuzz-smoke.sh FUZZ_BUILD SECONDS TARGET_BINARY...
#   (`make fuzz FUZZ_SECONDS=N` calls it for every tests/fuzz/fuzz_*.c)
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 FUZZ_BUILD SECONDS TARGET_BINARY..." >&2
  exit 2
fi
build=$1
secs=$2
shift 2
tail_lines=${FUZZ_LOG_TAIL:-40}
mkdir -p "$build/logs"
failed=""

# stat NAME LOG: the value of libFuzzer's -print_final_stats line "stat::NAME:"
stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

for bin in "$@"; do
  n=$(basename "$bin")
  log=$build/logs/$n.log
  mkdir -p "$build/corpus/$n"
  dict=""
  [ -f "tests/fuzz/$n.dict" ] && dict="-dict=tests/fuzz/$n.dict"
  # $dict is empty or one word: left unquoted on purpose
  "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$build/" $dict \
      "$build/corpus/$n" "tests/corpus/$n" >"$log" 2>&1
  rc=$?
  seed=$(sed -n 's/^INFO: Seed: \([0-9]*\).*/\1/p' "$log" | head -n 1)
  # "#N DONE cov: C ft: F corp: U/SIZE ...": coverage and corpus at the end
  done_line=$(grep 'DONE  *cov:' "$log" | tail -n 1)
  cov=$(printf '%s\n' "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  corp=$(printf '%s\n' "$done_line" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
  if [ "$rc" -eq 0 ]; then
    printf '%-22s ok  %ss  %s runs  cov %s  corpus %s (+%s)  seed %s  log %s\n' \
      "$n" "$secs" "$(stat number_of_executed_units "$log")" "${cov:-?}" "${corp:-?}" \
      "$(stat new_units_added "$log")" "${seed:-?}" "$log"
  else
    printf '%-22s FAILED (exit %s)  seed %s  log %s\n' "$n" "$rc" "${seed:-?}" "$log"
    grep -o 'Test unit written to .*' "$log" | sed 's/^/    /'
    echo "    --- last $tail_lines lines of $log"
    tail -n "$tail_lines" "$log" | sed 's/^/    /'
    failed="$failed $n"
  fi
done
if [ -n "$failed" ]; then
  echo "fuzz: failed:$failed" >&2
  exit 1
fi
echo "fuzz: $# targets clean, ${secs}s each (full logs under $build/logs)"

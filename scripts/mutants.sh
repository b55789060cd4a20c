#!/bin/sh
# Mutation check (make mutants): applies each mutant of a list, rebuilds what
# it touches (CUDA=0, its own build tree), runs the suites the list names
# for it with several seeds, restores the file, and reports killed/survived.
#
#   sh scripts/mutants.sh [LIST] [FILTER]
#     LIST    default tests/mutants/mutants.txt
#     FILTER  run only mutants whose name contains it
#   MUTANT_SEEDS="0x1 0x2"   seeds (TSAFE_TEST_SEED) for every suite run;
#                            default: three fresh ones, printed
#   MUTANT_JOBS=2            make -j
#   MUTANT_BUILD=build/mutants
#
# List format: one mutant per line, four fields separated by a tab: a name
# and file ("name:path"), the exact text (must occur exactly once in the
# file), its replacement (may be empty), the suites (space-separated test
# binary names). In text and replacement \n is a newline, \t a tab, \\ a
# backslash. Lines starting with # and blank lines are skipped.
#
# A mutant is killed when, for every seed, at least one named suite fails;
# killed by some seeds only is reported as "flaky" and counts as survived.
# Exit: 0 when every mutant is killed, 1 when one survives, 2 on a broken
# list (text not found exactly once), a baseline failure or a build error.
set -u
list=${1:-tests/mutants/mutants.txt}
filter=${2:-}
jobs=${MUTANT_JOBS:-2}
bdir=${MUTANT_BUILD:-build/mutants}
[ -f "$list" ] || { echo "mutants: no list '$list'" >&2; exit 2; }
command -v perl >/dev/null || { echo "mutants: needs perl" >&2; exit 2; }

seeds=${MUTANT_SEEDS:-}
if [ -z "$seeds" ]; then
  for i in 1 2 3; do
    seeds="$seeds 0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
  done
fi
echo "mutants: list $list, seeds:$seeds"

tmp=$(mktemp -d)
restore_file=""
cleanup() {
  if [ -n "$restore_file" ] && [ -f "$tmp/orig" ]; then
    cp "$tmp/orig" "$restore_file" && touch "$restore_file"
    echo "mutants: restored $restore_file"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# count FILE: occurrences of $MUT_TEXT (escapes decoded) in FILE
count() {
  perl -0777 -ne '
    sub dec { my $s = shift; $s =~ s/\\(n|t|\\)/$1 eq "n" ? "\n" : $1 eq "t" ? "\t" : "\\"/ge; $s }
    my $t = dec($ENV{MUT_TEXT}); my $n = 0; my $p = 0;
    while (($p = index($_, $t, $p)) >= 0) { $n++; $p += length $t }
    print $n' "$1"
}
# apply FILE: replace the one occurrence of $MUT_TEXT by $MUT_REPL
apply() {
  perl -0777 -i -pe '
    sub dec { my $s = shift; $s =~ s/\\(n|t|\\)/$1 eq "n" ? "\n" : $1 eq "t" ? "\t" : "\\"/ge; $s }
    my $t = dec($ENV{MUT_TEXT}); my $r = dec($ENV{MUT_REPL});
    my $p = index($_, $t); substr($_, $p, length $t) = $r if $p >= 0' "$1"
}

build() { # suites...
  targets=""
  for s in "$@"; do targets="$targets $bdir/tests/$s"; done
  make --no-print-directory -j"$jobs" BUILD="$bdir" CUDA=0 $targets </dev/null >"$tmp/build.log" 2>&1
}

tab=$(printf '\t')
# first pass: check the list, collect every suite for the baseline
all_suites=""
bad=0
n=0
while IFS="$tab" read -r head text repl suites; do
  case "$head" in ''|'#'*) continue;; esac
  name=${head%%:*}; file=${head#*:}
  if [ -n "$filter" ]; then case "$name" in *"$filter"*) ;; *) continue;; esac; fi
  n=$((n + 1))
  if [ ! -f "$file" ]; then echo "mutants: $name: no file $file"; bad=1; continue; fi
  c=$(MUT_TEXT="$text" count "$file")
  if [ "$c" != 1 ]; then echo "mutants: $name: text occurs $c times in $file (need 1)"; bad=1; fi
  [ -n "$suites" ] || { echo "mutants: $name: no suites"; bad=1; }
  for s in $suites; do
    case " $all_suites " in *" $s "*) ;; *) all_suites="$all_suites $s";; esac
  done
done < "$list"
[ "$n" -gt 0 ] || { echo "mutants: no mutant in $list${filter:+ matching '$filter'}"; exit 2; }
[ "$bad" = 0 ] || { echo "mutants: fix the list first (exact text, exactly once)"; exit 2; }

echo "mutants: baseline build and run of:$all_suites"
t0=$(date +%s)
build $all_suites || { tail -20 "$tmp/build.log"; echo "mutants: baseline build failed"; exit 2; }
set -- $seeds
for s in $all_suites; do
  if ! TSAFE_TEST_SEED=$1 "$bdir/tests/$s" </dev/null >"$tmp/run.log" 2>&1; then
    tail -20 "$tmp/run.log"
    echo "mutants: baseline $s fails (seed $1): a mutant run would mean nothing"
    exit 2
  fi
done

killed=0; survived=0; errors=0; total=0
while IFS="$tab" read -r head text repl suites; do
  case "$head" in ''|'#'*) continue;; esac
  name=${head%%:*}; file=${head#*:}
  if [ -n "$filter" ]; then case "$name" in *"$filter"*) ;; *) continue;; esac; fi
  total=$((total + 1))
  m0=$(date +%s)
  cp "$file" "$tmp/orig"
  restore_file=$file
  MUT_TEXT="$text" MUT_REPL="$repl" apply "$file"
  if ! build $suites; then
    verdict="error (does not build)"
    errors=$((errors + 1))
  else
    hits=0; by=""
    for seed in $seeds; do
      hit=0
      for s in $suites; do
        # a suite that hangs on a mutant counts as failing after 10 minutes
        if ! TSAFE_TEST_SEED=$seed timeout 600 "$bdir/tests/$s" </dev/null >"$tmp/run.log" 2>&1; then
          hit=1; by="$s"; break
        fi
      done
      hits=$((hits + hit))
    done
    nseeds=$(echo $seeds | wc -w)
    if [ "$hits" = "$nseeds" ]; then
      verdict="killed (by $by)"; killed=$((killed + 1))
    elif [ "$hits" = 0 ]; then
      verdict="SURVIVED"; survived=$((survived + 1))
    else
      verdict="SURVIVED (flaky: killed by $hits of $nseeds seeds)"; survived=$((survived + 1))
    fi
  fi
  cp "$tmp/orig" "$file" && touch "$file"
  restore_file=""
  printf '%-28s %-44s %s (%ss)\n' "$name" "$file" "$verdict" $(( $(date +%s) - m0 ))
done < "$list"

# the tree's own sources are back: rebuild so build/mutants holds no mutant
build $all_suites || true
score=$(awk -v k="$killed" -v t="$total" 'BEGIN { printf "%.1f", t ? 100 * k / t : 0 }')
echo "mutants: $killed of $total killed ($score %), $survived survived, $errors errors, $(( $(date +%s) - t0 ))s"
[ "$errors" = 0 ] || exit 2
[ "$survived" = 0 ] || exit 1
exit 0

#!/bin/sh
# Renders the PNG plots of docs/PERFORMANCE.md from fresh benchmark runs:
#   docs/plots/lora_stages.png   per-stage breakdown of the per-token delta
#   docs/plots/lora_rank.png     latency vs rank and parameter set (d=2048)
#   docs/plots/core_vs_seal.png  core operations vs SEAL 4.4.3 (PERFORMANCE.md §1)
# Usage: scripts/plots.sh [path/to/tensafe]
set -eu
TENSAFE=${1:-build/bin/tensafe}
out=docs/plots
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1

"$TENSAFE" bench lora --tsv > "$tmp/lora.tsv"
"$TENSAFE" bench lora-sweep --tsv > "$tmp/sweep.tsv"
"$TENSAFE" bench core --tsv --quick > "$tmp/core.tsv"

# stages: rows "  <mode>: <stage> (mean)" -> one line per (config, stage)
awk -F'\t' '$2 ~ /: (encrypt|products|serialize|decrypt|sums|B\*u) \(mean\)/ {
    split($2, a, ": "); mode = a[1]; gsub(/^ +/, "", mode); st = a[2]; sub(/ \(mean\)/, "", st);
    split($3, p, " "); cfg = mode "\\n" p[1] " " p[2];
    key = cfg; if (!(key in seen)) { seen[key] = ++n; name[n] = cfg }
    v[seen[key], st] = $4 }
  END { split("encrypt products serialize decrypt sums B*u", S, " ");
    printf "config"; for (s = 1; s <= 6; s++) printf "\t%s", S[s]; printf "\n";
    for (i = 1; i <= n; i++) { printf "\"%s\"", name[i];
      for (s = 1; s <= 6; s++) printf "\t%s", ((i, S[s]) in v) ? v[i, S[s]] : 0; printf "\n" } }' \
  "$tmp/lora.tsv" > "$tmp/stages.dat"

awk -F'\t' '{ split($3, p, " "); r = p[3]; sub(/r=/, "", r); print $2 "\t" r "\t" $4 }' \
  "$tmp/sweep.tsv" > "$tmp/sweep.dat"

# core vs SEAL 4.4.3's medians recorded in docs/PERFORMANCE.md section 1
# (2026-11-23, scripts/bench-vs-seal.sh, seed-n16384), ours at seed-n16384
awk -F'\t' '$3 ~ /seed-n16384/ {
    if ($2 ~ /^ntt forward/ && $3 ~ /scalar/ && !f++) print "\"NTT fwd (60b scalar)\"\t" $4 "\t192.2";
    if ($2 ~ /^ntt inverse/ && $3 ~ /scalar/ && !g++) print "\"NTT inv (60b scalar)\"\t" $4 "\t140.6";
    if ($2 ~ /^ntt forward/ && $3 ~ /ifma/) print "\"NTT fwd (40b IFMA)\"\t" $4 "\t192.3";
    if ($2 ~ /^encrypt \(secret/) print "\"encrypt sk\"\t" $4 "\t2045.6";
    if ($2 ~ /^ct x pt \(prepared/) print "\"ct x pt\"\t" $4 "\t245.2";
    if ($2 ~ /^rescale/) print "\"rescale\"\t" $4 "\t954.8";
    if ($2 == "decode") print "\"decode\"\t" $4 "\t1439.6"; }' "$tmp/core.tsv" > "$tmp/core.dat"

gnuplot <<GP
set terminal pngcairo size 1000,560 font "sans,10"
set datafile separator "\t"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set key outside right
set ylabel "µs per token (mean of the timed runs)"
set title "HE-LoRA per-token delta, one site, rank 32 (tensafe bench lora)"
set xtics rotate by -25 font ",8"
set output "$out/lora_stages.png"
plot for [i=2:7] "$tmp/stages.dat" using i:xtic(1) title columnheader(i)

set style data linespoints
unset style histogram
set title "Local-mode per-token delta vs rank, d=2048 (tensafe bench lora-sweep)"
set xlabel "rank r"
set ylabel "median µs per token"
set logscale y
set xtics norotate 8,2 font ",10"
set logscale x 2
set output "$out/lora_rank.png"
plot for [s in "auto ifma-n8192 seed-n16384 seed-n32768 plaintext"] \
  "< awk -F'\t' '\$1==\"".s."\"' $tmp/sweep.dat" using 2:3 title s lw 2
unset logscale x

set title "Core operations at N=16384 (seed preset) vs SEAL 4.4.3 (docs/PERFORMANCE.md §1, 2026-11-23)"
set style data histograms
set style histogram clustered gap 1
set xlabel ""
set ylabel "µs (log scale)"
set xtics rotate by -20 font ",9"
set output "$out/core_vs_seal.png"
plot "$tmp/core.dat" using 2:xtic(1) title "TenSafe-HE (measured here)", \
     "" using 3 title "SEAL 4.4.3 (recorded run, not this one)"
GP
echo "plots written to $out/: lora_stages.png lora_rank.png core_vs_seal.png"

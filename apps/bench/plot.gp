# SPDX-License-Identifier: MIT
# total_ms per frame of the agents (or mixed) workload against N, one line per kind.
if (!exists("workload")) workload = "agents"
# Called by plot.sh with: datadir (one <kind>.dat per kind: "n total_ms"),
# kinds (space-separated names), out (PNG path), workload (agents or mixed).
set terminal pngcairo size 1000,650 noenhanced font ",11"
set output out
set title "quadgrid-bench ".workload.": median time per frame (update + pairs)"
set xlabel "N (agents)"
set ylabel "total ms per frame"
set logscale xy
set grid xtics ytics mxtics mytics
set key outside right top
plot for [k in kinds] datadir.'/'.k.'.dat' using 1:2 with linespoints linewidth 2 title k

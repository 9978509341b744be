# Plots bench.py's bootstrap medians: one line per method against the cluster size, min-max as
# error bars. bench.py passes datafile (one gnuplot data block per method, its title first), blocks,
# outfile and subtitle with -e.
set terminal pngcairo size 900,560 font ",11"
set output outfile
set title "Bootstrap to all members healthy (median, min-max)\n{/*0.8 ".subtitle."}"
set xlabel "cluster size N"
set ylabel "seconds"
set xtics (3, 5, 7)
set xrange [2.5:7.5]
set yrange [0:*]
set key top left
set grid ytics
plot for [i=0:blocks-1] datafile index i using 1:2:3:4 with yerrorlines lw 2 pt 7 title columnheader(1)

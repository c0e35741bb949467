set terminal pngcairo size 1500,480 font ',10'
set output '/work/main/bench/results/overhead-dbench.png'
set multiplot layout 1,3 title 'bench/overhead: dbench (median, bars min–max)'
set logscale x 2; set xrange [5:800]; set xtics (8,32,128,512); set grid
set xlabel 'checker\_cache\_mb'; set key below font ',8'; set yrange [0:*]; set offsets 0,0,graph 0.1,0
set ylabel 'operations per second'
plot '/work/main/bench/results/overhead-dbench.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 15348.6 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 16953.9 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 5850.0 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 32694.4 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device reads per second'
plot '/work/main/bench/results/overhead-dbench.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 17.9 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 17.6 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 1.1 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 1.6 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device writes per second'
plot '/work/main/bench/results/overhead-dbench.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 3194.7 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 2667.0 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 2488.4 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 1308.1 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
unset multiplot; unset logscale x
set terminal pngcairo size 1500,480 font ',10'
set output '/work/main/bench/results/overhead-postmark.png'
set multiplot layout 1,3 title 'bench/overhead: postmark (median, bars min–max)'
set logscale x 2; set xrange [5:800]; set xtics (8,32,128,512); set grid
set xlabel 'checker\_cache\_mb'; set key below font ',8'; set yrange [0:*]; set offsets 0,0,graph 0.1,0
set ylabel 'operations per second'
plot '/work/main/bench/results/overhead-postmark.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 2789.1 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 2591.5 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 823.9 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 9823.0 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device reads per second'
plot '/work/main/bench/results/overhead-postmark.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 8.8 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 16.4 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 0.8 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 8.7 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device writes per second'
plot '/work/main/bench/results/overhead-postmark.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 432.5 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 463.4 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 8.5 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 8.7 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
unset multiplot; unset logscale x
set terminal pngcairo size 1500,480 font ',10'
set output '/work/main/bench/results/overhead-web.png'
set multiplot layout 1,3 title 'bench/overhead: web (median, bars min–max)'
set logscale x 2; set xrange [5:800]; set xtics (8,32,128,512); set grid
set xlabel 'checker\_cache\_mb'; set key below font ',8'; set yrange [0:*]; set offsets 0,0,graph 0.1,0
set ylabel 'operations per second'
plot '/work/main/bench/results/overhead-web.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 19359.7 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 19953.1 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 10312.3 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 46056.6 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device reads per second'
plot '/work/main/bench/results/overhead-web.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 94.0 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 92.8 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 55.3 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 99.7 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device writes per second'
plot '/work/main/bench/results/overhead-web.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 63.3 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 64.5 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 29.8 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 56.9 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
unset multiplot; unset logscale x

set terminal pngcairo size 1500,480 font ',10'
set output '/tmp/bench-ovh/overhead-dbench.png'
set multiplot layout 1,3 title 'bench/overhead: dbench (median, bars min–max)'
set logscale x 2; set xrange [5:800]; set xtics (8,32,128,512); set grid
set xlabel 'checker\_cache\_mb'; set key below font ',8'; set yrange [0:*]; set offsets 0,0,graph 0.1,0
set ylabel 'operations per second'
plot '/tmp/bench-ovh/overhead-dbench.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 5536.4 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 5718.5 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 4977.2 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 10007.8 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device reads per second'
plot '/tmp/bench-ovh/overhead-dbench.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 17.6 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 15.4 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 0.3 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 2.3 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device writes per second'
plot '/tmp/bench-ovh/overhead-dbench.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 1013.2 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 892.8 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 1829.5 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 433.3 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
unset multiplot; unset logscale x
set terminal pngcairo size 1500,480 font ',10'
set output '/tmp/bench-ovh/overhead-postmark.png'
set multiplot layout 1,3 title 'bench/overhead: postmark (median, bars min–max)'
set logscale x 2; set xrange [5:800]; set xtics (8,32,128,512); set grid
set xlabel 'checker\_cache\_mb'; set key below font ',8'; set yrange [0:*]; set offsets 0,0,graph 0.1,0
set ylabel 'operations per second'
plot '/tmp/bench-ovh/overhead-postmark.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 963.4 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 987.3 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 319.3 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 2895.3 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device reads per second'
plot '/tmp/bench-ovh/overhead-postmark.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 3.7 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 12.9 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 0.6 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 2.6 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device writes per second'
plot '/tmp/bench-ovh/overhead-postmark.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 526.8 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 429.5 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 36.2 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 1007.4 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
unset multiplot; unset logscale x
set terminal pngcairo size 1500,480 font ',10'
set output '/tmp/bench-ovh/overhead-web.png'
set multiplot layout 1,3 title 'bench/overhead: web (median, bars min–max)'
set logscale x 2; set xrange [5:800]; set xtics (8,32,128,512); set grid
set xlabel 'checker\_cache\_mb'; set key below font ',8'; set yrange [0:*]; set offsets 0,0,graph 0.1,0
set ylabel 'operations per second'
plot '/tmp/bench-ovh/overhead-web.dat' index 0 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 11224.8 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 11557.6 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 7247.3 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 14356.6 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device reads per second'
plot '/tmp/bench-ovh/overhead-web.dat' index 1 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 85.6 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 163.8 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 54.7 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 102.0 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
set ylabel 'device writes per second'
plot '/tmp/bench-ovh/overhead-web.dat' index 2 using 1:2:3:4 with yerrorlines lw 2 lc rgb '#e7298a' title 'checker on', 37.8 with lines dt 2 lc rgb '#1b9e77' lw 2 title 'checker off', 35.3 with lines dt 3 lc rgb '#7570b3' lw 2 title 'journal off (checker on, 128 MB)', 22.3 with lines dt 4 lc rgb '#d95f02' lw 2 title 'fuse2fs', 21.3 with lines dt 1 lc rgb '#000000' lw 2 title 'kernel ext3'
unset multiplot; unset logscale x

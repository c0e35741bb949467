#!/bin/bash
# Known gap: dio_race over the io_uring queues (fuse_uring=on): about one
# stale buffered read in 3,000 rounds of asynchronous O_DIRECT writes.
DIO_RACE_URING=1 exec "$(dirname "$0")/dio_race_parallel.sh"

#!/bin/bash
# dio_race over the io_uring queues (fuse_uring=on): ten direct writes in
# flight, all of whose replies a queue of 16 entries can hold until their
# invalidation.
DIO_RACE_URING=1 exec "$(dirname "$0")/dio_race_parallel.sh"

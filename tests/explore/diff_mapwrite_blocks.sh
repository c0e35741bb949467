#!/bin/bash
# The differential run's seed 9019 (found by bench/soak-explore): 60 fsx ops
# on 1 KiB blocks, where an mmap write of 55,501 bytes into a hole of a file
# raises st_blocks by 1,030 sectors on the kernel's ext3 and by 116 on
# recon-fuse.  The kernel (6.18 here) allocated the 512 blocks of the
# 512 KiB-aligned run around the fault: its page cache held the fault's page
# in a large folio, and ext4's page_mkwrite allocates and zeroes the blocks
# of the whole folio.  recon-fuse allocates those of the 14 pages written
# back, as the same kernel does when the page is in a small folio (the same
# write into a fresh sparse file: 118 sectors on both).  Both st_blocks
# describe what is allocated (e2fsck checks i_blocks on both images, fsx the
# contents); outcome_diff.py accepts the kernel's surplus as fault-blocks
# within the folios around each mmap write, and this seed must pass with it.
DIFF_SEEDS=9019 DIFF_OPS=60 DIFF_BS=1024 DIFF_TOOLS=fsx exec "$(dirname "$0")/diff.sh"

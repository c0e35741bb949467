/* io/jbd.c - the ext3 journal (see jbd.h).  Being written by the journal work. */
#include "jbd.h"

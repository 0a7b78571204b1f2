/* wb/atomic_file.h (floor base): files written whole or not at all (atomic_file.c): a temporary file in the
 * target's folder, every write checked, fsync, rename over the target. A reader (or a crash)
 * sees the earlier file or the new one, never a part. */
#ifndef WB_ATOMIC_FILE_H
#define WB_ATOMIC_FILE_H

#include <limits.h>
#include <stdio.h>

#include <wb/wb.h>

typedef struct wb_atomic_file {
    FILE *f;
    char path[PATH_MAX];
    char tmp[PATH_MAX]; /* "" when writing in place: a target that is not a regular file (/dev/full) */
    long long written;  /* bytes handed to f so far (wb_atomic_wrote) */
    long long started;  /* bytes whose writeback to the disk has been started */
    long long waited;   /* bytes known to be on the disk */
} wb_atomic_file;

/* Opens the temporary file; `what` names the caller in messages ("export_chrome_trace"). */
wb_status wb_atomic_open(wb_atomic_file *a, const char *path, const char *what);
/* Checks every write, flushes, fsyncs, closes and renames; on any failure removes the temporary
 * file, leaves the target as it was and returns an error naming the path and the reason. */
wb_status wb_atomic_commit(wb_atomic_file *a, const char *what);
/* Counts n more bytes written to a->f. Every 32 MiB it starts the disk's writeback of the new
 * bytes and waits for the 32 MiB before them, so a large file (a trace of millions of events)
 * goes to the disk while the rest is still being formatted, the commit's fsync finds little
 * left to do, and no more than about 64 MiB of it is ever dirty in the page cache. */
void wb_atomic_wrote(wb_atomic_file *a, size_t n);
/* Gives up: closes and removes the temporary file. */
void wb_atomic_abort(wb_atomic_file *a);

#endif

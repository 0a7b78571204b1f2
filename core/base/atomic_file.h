/* atomic_file.h: files written whole or not at all (atomic_file.c): a temporary file in the
 * target's folder, every write checked, fsync, rename over the target. A reader (or a crash)
 * sees the earlier file or the new one, never a part. */
#ifndef WB_ATOMIC_FILE_H
#define WB_ATOMIC_FILE_H

#include <limits.h>
#include <stdio.h>

#include "wb.h"

typedef struct wb_atomic_file {
    FILE *f;
    char path[PATH_MAX];
    char tmp[PATH_MAX]; /* "" when writing in place: a target that is not a regular file (/dev/full) */
} wb_atomic_file;

/* Opens the temporary file; `what` names the caller in messages ("export_chrome_trace"). */
wb_status wb_atomic_open(wb_atomic_file *a, const char *path, const char *what);
/* Checks every write, flushes, fsyncs, closes and renames; on any failure removes the temporary
 * file, leaves the target as it was and returns an error naming the path and the reason. */
wb_status wb_atomic_commit(wb_atomic_file *a, const char *what);
/* Gives up: closes and removes the temporary file. */
void wb_atomic_abort(wb_atomic_file *a);

#endif

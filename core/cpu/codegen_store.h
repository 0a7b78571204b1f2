/* codegen_store.h: the files of the code cache (codegen_cache.c's disk side), made so that another
 * local user cannot plant what the process loads: a folder owned by the user with mode 0700,
 * files created new (O_EXCL | O_NOFOLLOW) and renamed into place, and objects loaded only when
 * the record beside them names their source, compiler command and bytes. */
#ifndef WB_CODEGEN_STORE_H
#define WB_CODEGEN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <wb/wb.h>

/* "/proc/self/fd/<dirfd>/name": the file in the folder checked, whatever its path names now
 * (for dlopen, which takes a path); dir/name when /proc is not there. */
void wb_store_path(int dirfd, const char *dir, const char *name, char *out, size_t len);

/* 64-bit FNV-1a of n bytes, continuing from h (0xcbf29ce484222325 to start). */
uint64_t wb_store_hash(uint64_t h, const void *data, size_t n);

/* Creates the folder (and its parents, mode 0700) when missing, then opens it. Refused, with the
 * reason, unless the folder opened is owned by this user with no access for group or others.
 * Returns its descriptor, or -1 with the error set (WB_ERR_UNSUPPORTED: the code generator is
 * off). */
int wb_store_open(const char *dir);

/* Writes data as dir/name: a new temporary file beside it (O_EXCL | O_NOFOLLOW, mode 0600) renamed
 * into place. 0, or -1 with errno. */
int wb_store_write(int dirfd, const char *name, const void *data, size_t n);

/* Reads dir/name whole (a regular file of this user, not a symlink, at most 256 MiB) into a new
 * buffer; *fd (when not NULL) keeps the file open for loading exactly what was read. 0, or -1. */
int wb_store_read(int dirfd, const char *name, char **data, size_t *n, int *fd);

/* The record of an object: what it was made from (the source's hash, the compile command) and
 * its bytes' hash and size, as one text. */
void wb_store_record(char *out, size_t len, const char *command, uint64_t source_hash, const void *object, size_t n);

/* 1 when dir/record_name holds exactly the record of these bytes, made from this source and command. */
int wb_store_record_matches(int dirfd, const char *record_name, const char *command, uint64_t source_hash,
                            const void *object, size_t n);

#endif

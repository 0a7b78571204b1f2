/* codegen_store.c: the files of the code cache (see codegen_store.h): the folder's owner and mode
 * checked before anything in it is trusted, new files that cannot follow a planted symlink, and
 * the record that ties an object to its source, its compile command and its bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen_store.h"

#define MAX_FILE ((size_t)256 << 20)

uint64_t wb_store_hash(uint64_t h, const void *data, size_t n) {
    const unsigned char *u = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ u[i]) * 0x100000001b3ull;
    return h;
}

void wb_store_path(int dirfd, const char *dir, const char *name, char *out, size_t len) {
    snprintf(out, len, "/proc/self/fd/%d", dirfd);
    if (access(out, X_OK) == 0) snprintf(out, len, "/proc/self/fd/%d/%s", dirfd, name);
    else snprintf(out, len, "%s/%s", dir, name);
}

static int make_dirs(const char *path) {
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0700) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
}

int wb_store_open(const char *dir) {
    if (make_dirs(dir))
        return wb_error(WB_ERR_UNSUPPORTED, "codegen: cannot create the cache folder %s: %s", dir, strerror(errno)), -1;
    /* what is checked is the folder opened; everything after goes through this descriptor (a
     * path swapped later changes nothing) */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return wb_error(WB_ERR_UNSUPPORTED, "codegen: the cache folder %s cannot be opened: %s", dir, strerror(errno)), -1;
    struct stat st;
    const char *why = NULL;
    char buf[128];
    if (fstat(fd, &st))
        why = strerror(errno);
    else if (st.st_uid != geteuid())
        why = (snprintf(buf, sizeof buf, "it is owned by uid %ld, not by this user (uid %ld)", (long)st.st_uid,
                        (long)geteuid()),
               buf);
    else if (st.st_mode & 077)
        why = (snprintf(buf, sizeof buf, "its mode is %04o: group and others may not use it (chmod 700 it)",
                        (unsigned)(st.st_mode & 07777)),
               buf);
    if (why) {
        close(fd);
        return wb_error(WB_ERR_UNSUPPORTED,
                        "codegen: the cache folder %s is refused: %s (another user could plant code that this "
                        "process would load); set WB_CACHE_DIR to a folder of your own",
                        dir, why),
               -1;
    }
    return fd;
}

int wb_store_write(int dirfd, const char *name, const void *data, size_t n) {
    char tmp[300];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", name, (long)getpid()) >= (int)sizeof tmp) return errno = ENAMETOOLONG, -1;
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dirfd, tmp, flags, 0600);
    if (fd < 0 && errno == EEXIST) { /* left by a killed process that had this pid */
        unlinkat(dirfd, tmp, 0);
        fd = openat(dirfd, tmp, flags, 0600);
    }
    if (fd < 0) return -1;
    const char *p = data;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            unlinkat(dirfd, tmp, 0);
            return errno = e, -1;
        }
        done += (size_t)w;
    }
    if (close(fd) || renameat(dirfd, tmp, dirfd, name)) {
        int e = errno;
        unlinkat(dirfd, tmp, 0);
        return errno = e, -1;
    }
    return 0;
}

int wb_store_read(int dirfd, const char *name, char **data, size_t *n, int *keep) {
    /* O_NONBLOCK: a FIFO planted here is not waited on (the fd is kept only for a regular file,
     * where it changes nothing) */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    char *buf = NULL;
    size_t size = 0;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (size_t)st.st_size <= MAX_FILE;
    if (ok) {
        size = (size_t)st.st_size;
        ok = (buf = malloc(size ? size : 1)) != NULL;
    }
    for (size_t done = 0; ok && done < size;) {
        ssize_t r = pread(fd, buf + done, size - done, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) ok = 0;
        else done += (size_t)r;
    }
    if (!ok) {
        free(buf);
        close(fd);
        return -1;
    }
    *data = buf, *n = size;
    if (keep) *keep = fd;
    else close(fd);
    return 0;
}

void wb_store_record(char *out, size_t len, const char *command, uint64_t source_hash, const void *object, size_t n) {
    snprintf(out, len, "workbench code cache record 1\nsource fnv1a64:%016llx\ncommand %s\nobject fnv1a64:%016llx %zu bytes\n",
             (unsigned long long)source_hash, command,
             (unsigned long long)wb_store_hash(0xcbf29ce484222325ull, object, n), n);
}

int wb_store_record_matches(int dirfd, const char *record_name, const char *command, uint64_t source_hash,
                            const void *object, size_t n) {
    char want[1024], *have;
    size_t have_n;
    wb_store_record(want, sizeof want, command, source_hash, object, n);
    if (wb_store_read(dirfd, record_name, &have, &have_n, NULL)) return 0;
    int same = have_n == strlen(want) && memcmp(have, want, have_n) == 0;
    free(have);
    return same;
}

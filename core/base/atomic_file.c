/* atomic_file.c: whole-or-nothing file writes (see atomic_file.h). Used by the Chrome trace
 * and, through the bindings, by every file the Lua library saves. */
#define _GNU_SOURCE /* sync_file_range */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wb/atomic_file.h>

wb_status wb_atomic_open(wb_atomic_file *a, const char *path, const char *what) {
    memset(a, 0, sizeof *a);
    if (!path || !*path) return wb_error(WB_ERR_ARGUMENT, "%s: needs a file path", what);
    if (snprintf(a->path, sizeof a->path, "%s", path) >= (int)sizeof a->path)
        return wb_error(WB_ERR_ARGUMENT, "%s: path too long: '%.80s...'", what, path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) {
        /* a named pipe: opened without waiting, since with no reader open() would wait forever */
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 && errno == ENXIO)
            return wb_error(WB_ERR_ARGUMENT, "%s: '%s' is a named pipe with no reader: refused (writing would wait for one "
                                             "forever)", what, path);
        if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) || !(a->f = fdopen(fd, "w"))) {
            int err = errno;
            if (fd >= 0) close(fd);
            return wb_error(WB_ERR_ARGUMENT, "%s: cannot open '%s' for writing: %s", what, path, strerror(err));
        }
        return WB_OK;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* a device: nothing to replace */
        a->f = fopen(path, "w");
        if (!a->f)
            return wb_error(WB_ERR_ARGUMENT, "%s: cannot open '%s' for writing: %s", what, path, strerror(errno));
        return WB_OK;
    }
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(a->tmp, sizeof a->tmp, "%.*s.%s.tmp%ldXXXXXX", dir_len, path, slash ? slash + 1 : path,
                 (long)getpid()) >= (int)sizeof a->tmp)
        return wb_error(WB_ERR_ARGUMENT, "%s: path too long: '%.80s...'", what, path);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int err = errno;
        a->tmp[0] = '\0';
        return wb_error(WB_ERR_ARGUMENT, "%s: cannot open '%s' for writing: %s", what, path, strerror(err));
    }
    mode_t mask = umask(0); /* mkstemp makes 0600; give the file the mode fopen would */
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) { /* harmless: the file stays private */
    }
    a->f = fdopen(fd, "w");
    if (!a->f) {
        int err = errno;
        close(fd);
        unlink(a->tmp);
        return wb_error(WB_ERR_ARGUMENT, "%s: cannot open '%s' for writing: %s", what, path, strerror(err));
    }
    return WB_OK;
}

enum { WRITEBACK_WINDOW = 32 << 20 };

void wb_atomic_wrote(wb_atomic_file *a, size_t n) {
    a->written += (long long)n;
    if (!a->tmp[0] || a->written - a->started < WRITEBACK_WINDOW) return;
    if (fflush(a->f) != 0) return; /* the stream keeps the error: the commit reports it */
#ifdef SYNC_FILE_RANGE_WRITE
    int fd = fileno(a->f);
    /* hints only: a failure here (a file system without it) leaves the work to the fsync */
    (void)sync_file_range(fd, a->started, a->written - a->started, SYNC_FILE_RANGE_WRITE);
    if (a->started > a->waited)
        (void)sync_file_range(fd, a->waited, a->started - a->waited,
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
#endif
    a->waited = a->started;
    a->started = a->written;
}

void wb_atomic_abort(wb_atomic_file *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->tmp[0]) unlink(a->tmp);
    a->tmp[0] = '\0';
}

wb_status wb_atomic_commit(wb_atomic_file *a, const char *what) {
    int err = 0;
    if (ferror(a->f)) err = errno ? errno : EIO;
    if (!err && fflush(a->f) != 0) err = errno;
    if (!err && a->tmp[0] && fsync(fileno(a->f)) != 0) err = errno;
    if (fclose(a->f) != 0 && !err) err = errno;
    a->f = NULL;
    if (!err && a->tmp[0] && rename(a->tmp, a->path) != 0) err = errno;
    if (err) {
        if (a->tmp[0]) unlink(a->tmp);
        a->tmp[0] = '\0';
        return wb_error(WB_ERR_ARGUMENT, "%s: writing '%s' failed: %s (an earlier file there is left as it was)", what,
                        a->path, strerror(err));
    }
    a->tmp[0] = '\0';
    return WB_OK;
}

/* test_confine.c: the kernel's half of --sandbox (bindings/confine.c) on its own, with no Lua
 * checks in front of it: in a child process confined to a read folder and a write folder,
 * files elsewhere cannot be read or written (the library cannot be planted into), execve,
 * ptrace and sockets are refused, and the allowed folders still work. Skips (77) without
 * Landlock. Also the atomic writer (core/base/atomic_file.c): a failed write leaves the old file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wb/atomic_file.h>
#include "confine.h"

static int failures;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s (errno %s)\n", __FILE__, __LINE__, #cond, strerror(errno));    \
        }                                                                                                              \
    } while (0)

static char base[64], readable[96], writable[96], library[96], outside[96];

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int confined_child(void) {
    const char *read[] = {readable, library, NULL}, *write[] = {writable, NULL};
    char err[256];
    if (wb_confine_landlock(read, write, err, sizeof err) || wb_confine_seccomp(err, sizeof err)) {
        fprintf(stderr, "confine: %s\n", err);
        return 1;
    }
    char path[160];
    snprintf(path, sizeof path, "%s/in.txt", readable);
    CHECK(open(path, O_RDONLY) >= 0);
    CHECK(open(path, O_WRONLY) < 0 && errno == EACCES);           /* read-only folder */
    snprintf(path, sizeof path, "%s/out.txt", writable);
    CHECK(open(path, O_WRONLY | O_CREAT, 0644) >= 0);              /* --out is writable */
    snprintf(path, sizeof path, "%s/secret.txt", outside);
    CHECK(open(path, O_RDONLY) < 0 && errno == EACCES);            /* not listed: unreadable */
    CHECK(open("/etc/passwd", O_RDONLY) < 0 && errno == EACCES);
    CHECK(open("/usr/share/lua", O_RDONLY | O_DIRECTORY) >= 0 || errno == ENOENT); /* system folders */
    snprintf(path, sizeof path, "%s/zz_planted.lua", library);
    CHECK(open(path, O_WRONLY | O_CREAT, 0644) < 0 && errno == EACCES); /* nothing planted in the library */
    snprintf(path, sizeof path, "%s/moved", library);
    char from[160];
    snprintf(from, sizeof from, "%s/out.txt", writable);
    CHECK(rename(from, path) != 0);
    CHECK(mkdir("/tmp/wb_confine_escape", 0755) != 0 && errno == EACCES);
    CHECK(socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EPERM);
    CHECK(socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM);
    CHECK(ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0 && errno == EPERM);
    char *argv[] = {"/bin/true", NULL};
    execv("/bin/true", argv);
    CHECK(errno == EPERM || errno == EACCES);                      /* still here: execve refused */
    return failures ? 1 : 0;
}

static void test_atomic_file(void) {
    char path[160];
    snprintf(path, sizeof path, "%s/atomic.txt", writable);
    write_text(path, "old");
    wb_atomic_file a;
    CHECK(wb_atomic_open(&a, path, "test") == WB_OK);
    fputs("new, half written", a.f);
    wb_atomic_abort(&a); /* as if the writer failed midway */
    char buf[32] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 3 && !strcmp(buf, "old"));
    if (f) fclose(f);
    CHECK(wb_atomic_open(&a, path, "test") == WB_OK);
    fputs("new", a.f);
    CHECK(wb_atomic_commit(&a, "test") == WB_OK);
    f = fopen(path, "r");
    memset(buf, 0, sizeof buf);
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 3 && !strcmp(buf, "new"));
    if (f) fclose(f);
    /* a large file goes to the disk as it is written: every 32 MiB the new bytes are flushed to
     * the kernel and their writeback started, and the window before them is waited for */
    enum { MIB = 1 << 20 };
    static char piece[MIB];
    CHECK(wb_atomic_open(&a, path, "test") == WB_OK);
    for (int i = 0; i < 100; i++) {
        memset(piece, 'a' + i % 26, sizeof piece);
        CHECK(fwrite(piece, 1, sizeof piece, a.f) == sizeof piece);
        wb_atomic_wrote(&a, sizeof piece);
        struct stat st;
        CHECK(fstat(fileno(a.f), &st) == 0 && st.st_size >= a.started);
    }
    CHECK(a.written == 100LL * MIB && a.started == 96LL * MIB && a.waited == 64LL * MIB);
    CHECK(wb_atomic_commit(&a, "test") == WB_OK);
    f = fopen(path, "r");
    CHECK(f && fseek(f, 99L * MIB, SEEK_SET) == 0 && fgetc(f) == 'a' + 99 % 26 && fseek(f, 0, SEEK_END) == 0 &&
          ftell(f) == 100L * MIB);
    if (f) fclose(f);
    /* a full device: the write fails at flush or close, and says so */
    if (wb_atomic_open(&a, "/dev/full", "test") == WB_OK) {
        fputs("x", a.f);
        CHECK(wb_atomic_commit(&a, "test") != WB_OK);
        CHECK(strstr(wb_error_message(), "No space left on device") != NULL);
    }
}

int main(void) {
    snprintf(base, sizeof base, "/tmp/wb_confine_%ld", (long)getpid());
    snprintf(readable, sizeof readable, "%s/read", base);
    snprintf(writable, sizeof writable, "%s/write", base);
    snprintf(library, sizeof library, "%s/library", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    mkdir(base, 0755);
    mkdir(readable, 0755);
    mkdir(writable, 0755);
    mkdir(library, 0755);
    mkdir(outside, 0755);
    char path[160];
    snprintf(path, sizeof path, "%s/in.txt", readable);
    write_text(path, "in");
    snprintf(path, sizeof path, "%s/secret.txt", outside);
    write_text(path, "secret");
    test_atomic_file();
    int status = 77;
    if (wb_landlock_abi() >= 1) {
        pid_t pid = fork();
        if (pid == 0) _exit(confined_child());
        waitpid(pid, &status, 0);
        status = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        CHECK(access("/tmp/wb_confine_escape", F_OK) != 0);
        snprintf(path, sizeof path, "%s/zz_planted.lua", library);
        CHECK(access(path, F_OK) != 0);
    } else {
        printf("skipped the confined child: no Landlock on this kernel\n");
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
    if (failures || (status != 0 && status != 77)) {
        fprintf(stderr, "test_confine: %d failures (child status %d)\n", failures, status);
        return 1;
    }
    printf("test_confine: %s\n", status == 77 ? "skipped (no Landlock)" : "all checks held");
    return status == 77 ? 77 : 0;
}

/* confine.c: what the kernel enforces under --sandbox (guard.c decides when): Landlock (files
 * read-only beneath the allowed folders, read-write beneath --out, nothing else; no TCP bind or
 * connect; no signals or abstract sockets outside the sandbox), a seccomp filter (no execve,
 * ptrace, sockets), no_new_privs, and RLIMIT_AS for --max-memory. Deliberately no Lua here. */
#define _GNU_SOURCE /* O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <seccomp.h>

#include "confine.h"

/* Debian 12's headers stop at Landlock ABI 3; the later rights are stable kernel ABI. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define WB_LL_NET_BIND_TCP    (1ULL << 0)
#define WB_LL_NET_CONNECT_TCP (1ULL << 1)
#define WB_LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define WB_LL_SCOPE_SIGNAL        (1ULL << 1)

struct wb_landlock_attr { /* struct landlock_ruleset_attr as of ABI 6 */
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

int wb_landlock_abi(void) {
    const char *off = getenv("WB_LANDLOCK");
    if (off && !strcmp(off, "off")) return 0; /* tests: act as a kernel without Landlock */
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_rights(int abi) {
    uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
    if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5) all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return all;
}

static int add_path(int ruleset, const char *path, uint64_t rights, char *err, size_t errlen) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0; /* a system folder this machine lacks */
        snprintf(err, errlen, "cannot open %s for the sandbox: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) /* a file takes file rights only */
        rights &= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_EXECUTE |
                  LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
    struct landlock_path_beneath_attr rule = {.allowed_access = rights, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int saved = errno;
    close(fd);
    if (rc) {
        snprintf(err, errlen, "landlock: cannot add %s: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}

/* What the process needs after the script starts: shared libraries loaded late (dlopen), Lua
 * modules, time zones, CPU facts. Not /etc (passwords, hosts), not /home, not /tmp. */
static const char *const system_read[] = {
    "/usr", "/lib", "/lib64", "/etc/localtime", "/etc/ld.so.cache", "/proc/self", "/proc/cpuinfo",
    "/proc/meminfo", "/sys/devices/system/cpu", "/sys/devices/system/node", "/dev/urandom", NULL,
};

int wb_confine_landlock(const char *const *read_roots, const char *const *write_roots, char *err, size_t errlen) {
    int abi = wb_landlock_abi();
    if (abi < 1) {
        snprintf(err, errlen, "this kernel has no Landlock (needs Linux 5.13+ with landlock in the LSM list)");
        return -1;
    }
    uint64_t all = fs_rights(abi);
    uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    struct wb_landlock_attr attr = {.handled_access_fs = all};
    size_t size = sizeof(uint64_t); /* ABI 1-3 know only the first field */
    if (abi >= 4) {
        attr.handled_access_net = WB_LL_NET_BIND_TCP | WB_LL_NET_CONNECT_TCP; /* no rules: none allowed */
        size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = WB_LL_SCOPE_ABSTRACT_UNIX | WB_LL_SCOPE_SIGNAL;
        size = sizeof attr;
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0) {
        snprintf(err, errlen, "landlock: cannot create a ruleset: %s", strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; !rc && system_read[i]; i++) rc = add_path(ruleset, system_read[i], read, err, errlen);
    for (int i = 0; !rc && read_roots[i]; i++) rc = add_path(ruleset, read_roots[i], read, err, errlen);
    for (int i = 0; !rc && write_roots[i]; i++) rc = add_path(ruleset, write_roots[i], all, err, errlen);
    if (!rc) rc = add_path(ruleset, "/dev/null", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE, err, errlen);
    if (!rc && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
        snprintf(err, errlen, "cannot set no_new_privs: %s", strerror(errno));
        rc = -1;
    }
    if (!rc && syscall(SYS_landlock_restrict_self, ruleset, 0)) {
        snprintf(err, errlen, "landlock: cannot restrict the process: %s", strerror(errno));
        rc = -1;
    }
    close(ruleset);
    return rc;
}

int wb_confine_seccomp(char *err, size_t errlen) {
    /* refused with EPERM rather than killed: the script gets an error it can print */
    static const int refused[] = {
        SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(socket), SCMP_SYS(socketpair), SCMP_SYS(process_vm_readv),
        SCMP_SYS(process_vm_writev), SCMP_SYS(personality),
#ifndef WB_SANITIZE_BUILD
        /* The sanitizer build leaves ptrace to LeakSanitizer, which stops the process's own threads
         * with it at exit (and fails the run when refused); release builds refuse it. */
        SCMP_SYS(ptrace),
#endif
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
        snprintf(err, errlen, "cannot set no_new_privs: %s", strerror(errno));
        return -1;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(err, errlen, "seccomp: cannot create a filter");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof refused / sizeof refused[0]; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), refused[i], 0);
    if (!rc) rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc) snprintf(err, errlen, "seccomp: cannot install the filter: %s", strerror(-rc));
    return rc ? -1 : 0;
}

int wb_confine_memory(unsigned long long bytes, char *err, size_t errlen) {
    struct rlimit lim = {(rlim_t)bytes, (rlim_t)bytes};
    if (setrlimit(RLIMIT_AS, &lim)) {
        snprintf(err, errlen, "cannot limit memory to %llu bytes: %s", bytes, strerror(errno));
        return -1;
    }
    return 0;
}

int wb_confine_cpu_seconds(unsigned long long seconds, char *err, size_t errlen) {
    /* SIGXCPU at the soft limit (default action: the process ends), SIGKILL at the hard one */
    struct rlimit lim = {(rlim_t)seconds, (rlim_t)seconds + 1};
    if (setrlimit(RLIMIT_CPU, &lim)) {
        snprintf(err, errlen, "cannot limit CPU time: %s", strerror(errno));
        return -1;
    }
    return 0;
}

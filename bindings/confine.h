/* confine.h: the kernel's side of --sandbox, --max-memory and --timeout (confine.c). Each
 * returns 0, or -1 with the reason written to err. */
#ifndef WB_CONFINE_H
#define WB_CONFINE_H

#include <stddef.h>

/* The Landlock ABI this kernel offers, 0 without Landlock (or with WB_LANDLOCK=off, for tests). */
int wb_landlock_abi(void);
/* Files: read-only beneath read_roots (and the system folders the process needs), read-write
 * beneath write_roots (both NULL-terminated), nothing else; no TCP bind/connect (ABI >= 4). */
int wb_confine_landlock(const char *const *read_roots, const char *const *write_roots, char *err, size_t errlen);
/* execve, ptrace and sockets refused (EPERM); sets no_new_privs. */
int wb_confine_seccomp(char *err, size_t errlen);
/* RLIMIT_AS: address space in bytes. */
int wb_confine_memory(unsigned long long bytes, char *err, size_t errlen);
/* RLIMIT_CPU: the kernel ends the process after this much CPU time. */
int wb_confine_cpu_seconds(unsigned long long seconds, char *err, size_t errlen);

#endif

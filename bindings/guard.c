/* guard.c: what surrounds a script that the command line asked for: --timeout (a soft stop
 * that raises inside the script, a hard exit 1 s later, and the kernel's CPU limit behind
 * both), --max-memory, and --sandbox (scripts/wb/sandbox.lua narrows the globals for clear
 * messages; then the kernel enforces the policy: confine.c). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "confine.h"
#include "guard.h"
#include "repl.h"
#include "wb_lua.h"

/* --timeout: the first alarm makes every Lua instruction raise (a script cannot pcall its way
 * out). Coroutines inherit the count hook every call arms (repl.c's wb_lua_hook, which checks
 * here), so one running at the alarm raises within 1000 instructions too. What no hook reaches
 * (a C loop, a finalizer that re-arms itself) meets the hard exit 1 s later (status 124), and
 * the kernel's RLIMIT_CPU behind that even if the signal were lost. */
static lua_State *timed_state;
static const char *timeout_text;
static volatile sig_atomic_t timeout_fired;

void wb_guard_check(lua_State *L) {
    if (!timeout_fired) return;
    wb_lua_hook_now(L); /* (a coroutine's at every event too) */
    luaL_error(L, "timeout: the script ran past --timeout %s s", timeout_text);
}

static void on_alarm(int sig) {
    (void)sig;
    if (!timeout_fired) {
        timeout_fired = 1;
        wb_lua_hook_now(timed_state);
        struct itimerval grace = {{0, 0}, {1, 0}};
        setitimer(ITIMER_REAL, &grace, NULL);
        return;
    }
    static const char msg[] = "workbench: timeout: the script did not stop; exiting\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(124);
}

int wb_guard_timeout(lua_State *L, const char *text) {
    char *end;
    double secs = strtod(text, &end);
    if (end == text || *end || !(secs > 0) || secs > 1e7) {
        fprintf(stderr, "workbench: --timeout %s: expected a number of seconds > 0\n", text);
        return 2;
    }
    timed_state = L;
    timeout_text = text;
    char err[256];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (wb_confine_cpu_seconds((unsigned long long)((secs + 3) * (double)(cpus > 0 ? cpus : 1)), err, sizeof err)) {
        fprintf(stderr, "workbench: --timeout: %s\n", err);
        return 1;
    }
    signal(SIGALRM, on_alarm);
    struct itimerval t = {{0, 0}, {(time_t)secs, (suseconds_t)((secs - (double)(time_t)secs) * 1e6)}};
    setitimer(ITIMER_REAL, &t, NULL);
    return 0;
}

/* --max-memory SIZE ("4G", "512M", bytes, or "none"): RLIMIT_AS. The sanitizer build cannot
 * take one (AddressSanitizer reserves terabytes of address space for its shadow); it says so. */
int wb_guard_memory(const char *text, int explicit_option) {
    if (!strcmp(text, "none")) return 0;
    char *end;
    double v = strtod(text, &end);
    double unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, end++;
    if (end == text || *end || !(v * unit >= 16.0 * 1024 * 1024) || v * unit > 1e18) {
        fprintf(stderr, "workbench: --max-memory %s: expected a size of at least 16M (like 512M or 4G) or 'none'\n",
                text);
        return 2;
    }
#ifdef WB_SANITIZE_BUILD
    if (explicit_option)
        fprintf(stderr, "workbench: --max-memory is not applied in the sanitizer build (AddressSanitizer reserves "
                        "terabytes of address space)\n");
    return 0;
#else
    (void)explicit_option;
    char err[256];
    if (wb_confine_memory((unsigned long long)(v * unit), err, sizeof err)) {
        fprintf(stderr, "workbench: --max-memory %s: %s\n", text, err);
        return 1;
    }
    return 0;
#endif
}

/* Up to 15 strings of the list at idx of the table on top, NULL-terminated (they stay alive
 * in the registry: the table is anchored there). */
static void string_list(lua_State *L, const char *field, const char **out, int max) {
    int n = 0;
    if (lua_getfield(L, -1, field) == LUA_TTABLE) {
        for (int i = 1; n < max - 1; i++) {
            if (lua_rawgeti(L, -1, i) != LUA_TSTRING) {
                lua_pop(L, 1);
                break;
            }
            out[n++] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    out[n] = NULL;
}

/* Whether the canonical path `real` is the folder `root` or lies beneath it. */
static int in_tree(const char *real, const char *root) {
    size_t n = strlen(root);
    return !strncmp(real, root, n) && (real[n] == 0 || real[n] == '/');
}

/* --sandbox: scripts/wb/sandbox.lua narrows the globals and turns on the C path check (clear
 * messages), then the kernel enforces the same folders (Landlock) and refuses execve, ptrace
 * and sockets (seccomp). Without Landlock, --sandbox is refused unless the user asked for the
 * weaker Lua-only mode (--sandbox-weak). */
int wb_guard_sandbox(lua_State *L, const char *script, const char *script2, const char *out, int weak) {
    /* The script's folder is read: /dev/stdin's (a pipe, a here-document, a redirected file) would
     * open /dev to the script, /proc/self/fd/0's /proc */
    const char *scripts[] = {script, script2};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        const char *what = NULL;
        if (!scripts[i] || stat(scripts[i], &st) != 0) continue; /* (not there: said when it is loaded) */
        if (!S_ISREG(st.st_mode)) what = "is not a regular file (a pipe, a device or a folder)";
        else if (st.st_nlink == 0) what = "is a deleted file (a shell's here-document)";
        char folder[PATH_MAX], real[PATH_MAX];
        const char *slash = strrchr(scripts[i], '/');
        snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - scripts[i]) + 1 : 1, slash ? scripts[i] : ".");
        if (!what && realpath(folder, real) && (in_tree(real, "/dev") || in_tree(real, "/proc")))
            what = "lies in /dev or /proc, whose folder the script would read";
        if (what) {
            fprintf(stderr, "workbench: --sandbox runs a script file: %s %s; save the script to a file and give its "
                            "path\n", scripts[i], what);
            return 2;
        }
    }
    int abi = wb_landlock_abi();
    if (abi < 1 && !weak) {
        fprintf(stderr, "workbench: --sandbox: this kernel has no Landlock, so the sandbox cannot be enforced by the "
                        "kernel; refusing (pass --sandbox-weak to run with the Lua-level checks and seccomp only)\n");
        return 1;
    }
    lua_getglobal(L, "require");
    lua_pushstring(L, "cjson"); /* the library's own C module, loaded before C modules are closed */
    if (wb_lua_docall(L, 1, 0) != LUA_OK) return 1;
    lua_getglobal(L, "require");
    lua_pushstring(L, "wb.sandbox");
    if (wb_lua_docall(L, 1, 1) != LUA_OK) return 1;
    lua_createtable(L, 0, 4);
    wb_lua_setstring(L, "script", script);
    if (script2) wb_lua_setstring(L, "script2", script2);
    wb_lua_setstring(L, "out", out);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "wb_scripts_dir");
    lua_setfield(L, -3, "library");
    lua_pop(L, 1);
    if (wb_lua_docall(L, 1, 1) != LUA_OK) return 1;
    lua_pushvalue(L, -1);
    luaL_ref(L, LUA_REGISTRYINDEX); /* keeps the folder names alive */
    const char *read[20], *write[4];
    string_list(L, "read", read, 16);
    string_list(L, "write", write, 4);
    lua_pop(L, 1);
    /* the CUDA plugin, loaded at the first use of device cuda */
    char exe[PATH_MAX], mock[PATH_MAX + 32], real[PATH_MAX + 32];
    int n = 0;
    while (read[n]) n++;
    if (wb_executable_dir(exe, sizeof exe)) {
        snprintf(real, sizeof real, "%s/libwb_cuda.so", exe);
        snprintf(mock, sizeof mock, "%s/libwb_cuda_mock.so", exe);
        read[n++] = real;
        read[n++] = mock;
    }
    const char *plugin = getenv("WB_CUDA_PLUGIN");
    if (plugin && *plugin) read[n++] = plugin;
    read[n] = NULL;
    char err[512];
    if (abi >= 1 && wb_confine_landlock(read, write, err, sizeof err)) {
        fprintf(stderr, "workbench: --sandbox: %s\n", err);
        return 1;
    }
    if (abi < 1)
        fprintf(stderr, "workbench: --sandbox-weak: no Landlock on this kernel: files are checked by the library only\n");
    if (wb_confine_seccomp(err, sizeof err)) {
        fprintf(stderr, "workbench: --sandbox: %s\n", err);
        return 1;
    }
    return 0;
}

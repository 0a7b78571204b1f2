/* guard.c: what surrounds a script that the command line asked for: --timeout (a soft stop
 * that raises inside the script, then a hard exit) and --sandbox (scripts/wb/sandbox.lua
 * narrows the globals before the script's first line). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "guard.h"
#include "repl.h"
#include "wb_lua.h"

/* --timeout: the first alarm makes every Lua instruction raise (a script cannot pcall its way
 * out); if the script is still running 2 s later, the process exits with status 124. */
static lua_State *timed_state;
static const char *timeout_text;
static volatile sig_atomic_t timeout_fired;

static void timeout_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    luaL_error(L, "timeout: the script ran past --timeout %s s", timeout_text);
}

static void on_alarm(int sig) {
    (void)sig;
    if (!timeout_fired) {
        timeout_fired = 1;
        lua_sethook(timed_state, timeout_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
        struct itimerval grace = {{0, 0}, {2, 0}};
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
    signal(SIGALRM, on_alarm);
    struct itimerval t = {{0, 0}, {(time_t)secs, (suseconds_t)((secs - (double)(time_t)secs) * 1e6)}};
    setitimer(ITIMER_REAL, &t, NULL);
    return 0;
}

/* --sandbox: scripts/wb/sandbox.lua narrows the globals before the script's first line. */
int wb_guard_sandbox(lua_State *L, const char *script, const char *out) {
    lua_getglobal(L, "require");
    lua_pushstring(L, "cjson"); /* the library's own C module, loaded before C modules are closed */
    if (wb_lua_docall(L, 1, 0) != LUA_OK) return 1;
    lua_getglobal(L, "require");
    lua_pushstring(L, "wb.sandbox");
    if (wb_lua_docall(L, 1, 1) != LUA_OK) return 1;
    lua_createtable(L, 0, 3);
    wb_lua_setstring(L, "script", script);
    wb_lua_setstring(L, "out", out);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "wb_scripts_dir");
    lua_setfield(L, -3, "library");
    lua_pop(L, 1);
    return wb_lua_docall(L, 1, 0) == LUA_OK ? 0 : 1;
}

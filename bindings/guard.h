/* guard.h: what the executable puts around the interpreter and a script (main.c): the
 * allocator, --timeout and --sandbox. */
#ifndef WB_GUARD_H
#define WB_GUARD_H

#include <stddef.h>

#include <lua.h>

/* The interpreter's allocator: small blocks from per-size free lists (lua_alloc.c). */
void *wb_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* Arms --timeout SECS for the script running in L: returns 0, or 2 after printing why the
 * value is not a number of seconds > 0. */
int wb_guard_timeout(lua_State *L, const char *seconds_text);
/* Raises the timeout's error in L once --timeout has fired (called by the interpreter's hook). */
void wb_guard_check(lua_State *L);
/* Installs the --sandbox policy for `script` (and `script2`, NULL but for diff --ab: its folder is
 * read too) writing under `out` (Lua checks, then Landlock and seccomp; weak: Lua checks and
 * seccomp where the kernel lacks Landlock): 0; 2 when a script is no file of its own (a pipe, a
 * here-document, one in /dev or /proc); 1 otherwise, the error printed. */
int wb_guard_sandbox(lua_State *L, const char *script, const char *script2, const char *out, int weak);
/* --max-memory SIZE: 0, 2 for a bad size (printed), 1 when the limit cannot be set. */
int wb_guard_memory(const char *text, int explicit_option);

#endif

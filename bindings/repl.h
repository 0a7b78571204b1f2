/* repl.h: the interactive loop (plain for now: values print, multi-line input, errors survive). */
#ifndef WB_REPL_H
#define WB_REPL_H

#include <lua.h>

/* Reads, evaluates and prints until end of input. */
void wb_repl_run(lua_State *L);
/* Calls the function on top of the stack (nargs below it) with a traceback handler; on error
 * prints "workbench: <message + traceback>" to stderr. Returns the Lua status. */
int wb_lua_docall(lua_State *L, int nargs, int nresults);
/* Whether Ctrl-C (SIGINT) came during the last wb_lua_docall: the script ends with status 130. */
int wb_lua_interrupted(void);
/* The one hook of the interpreter (Ctrl-C, --timeout; see repl.c), and that hook made to run at
 * the next call, return or instruction of L (signal-safe). */
void wb_lua_hook(lua_State *L, lua_Debug *ar);
void wb_lua_hook_now(lua_State *L);

#endif

/* repl.c: the read-eval-print loop. Tries `return <line>` first so an expression's value
 * prints; keeps reading while the chunk is incomplete; an error prints and the loop goes on.
 * Uses readline (line editing, history) when built with it and stdin is a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "repl.h"
#ifdef WB_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int wb_lua_docall(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int status = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    if (status != LUA_OK) {
        fprintf(stderr, "workbench: %s\n", lua_tostring(L, -1));
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}

static char *read_line(const char *prompt, int tty) {
#ifdef WB_HAVE_READLINE
    if (tty) return readline(prompt);
#endif
    if (tty) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    char buf[4096];
    if (!fgets(buf, sizeof buf, stdin)) return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    return strdup(buf);
}

/* Incomplete chunks end their syntax error with "<eof>". */
static int incomplete(lua_State *L, int status) {
    if (status != LUA_ERRSYNTAX) return 0;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    return len >= 5 && !strcmp(msg + len - 5, "<eof>");
}

static void print_results(lua_State *L, int base) {
    int n = lua_gettop(L) - base;
    if (n == 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(L, base + i, &len);
        if (i > 1) fputc('\t', stdout);
        fwrite(s, 1, len, stdout);
        lua_pop(L, 1);
    }
    fputc('\n', stdout);
    fflush(stdout);
    lua_settop(L, base);
}

void wb_repl_run(lua_State *L) {
    int tty = isatty(STDIN_FILENO);
    if (tty) printf("workbench REPL (%s). Ctrl-D leaves.\n", LUA_RELEASE);
    char *line;
    char *chunk = NULL;
    size_t chunk_len = 0;
    while ((line = read_line(chunk ? ">> " : "> ", tty)) != NULL) {
        size_t n = strlen(line);
        char *grown = realloc(chunk, chunk_len + n + 2);
        if (!grown) {
            free(line);
            break;
        }
        chunk = grown;
        if (chunk_len) chunk[chunk_len++] = '\n';
        memcpy(chunk + chunk_len, line, n + 1);
        chunk_len += n;
        free(line);

        int base = lua_gettop(L);
        const char *ret = lua_pushfstring(L, "return %s;", chunk);
        int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
        lua_remove(L, -2);
        if (status != LUA_OK) {
            lua_pop(L, 1);
            status = luaL_loadbuffer(L, chunk, chunk_len, "=stdin");
            if (incomplete(L, status)) {
                lua_pop(L, 1);
                continue; /* keep reading */
            }
        }
#ifdef WB_HAVE_READLINE
        if (tty && chunk_len) add_history(chunk);
#endif
        free(chunk);
        chunk = NULL;
        chunk_len = 0;
        if (status != LUA_OK) {
            fprintf(stderr, "%s\n", lua_tostring(L, -1));
            lua_settop(L, base);
            continue;
        }
        if (wb_lua_docall(L, 0, LUA_MULTRET) == LUA_OK) print_results(L, base);
        lua_settop(L, base);
    }
    free(chunk);
    if (tty) fputc('\n', stdout);
}

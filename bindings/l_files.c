/* l_files.c: the one check every writer goes through under --sandbox (io.open's wrapper, the
 * library's saves, the native Chrome trace, folders) and whole-or-nothing file writes. The
 * allowed folders live here, in C, where a script cannot reach or replace them. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <wb/atomic_file.h>
#include "wb_lua.h"

#define MAX_ROOTS 16
static char *read_roots[MAX_ROOTS + 1], *write_roots[MAX_ROOTS + 1];
static int sandboxed;

/* The canonical form of path (symlinks and .. resolved); for a path that does not exist yet,
 * the canonical parent plus the last name. 0 when neither resolves. */
int wb_lua_canonical_path(const char *path, char *out, size_t len) {
    char buf[PATH_MAX];
    if (realpath(path, buf)) return snprintf(out, len, "%s", buf) < (int)len;
    if (errno != ENOENT) return 0;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char parent[PATH_MAX];
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == path)
        snprintf(parent, sizeof parent, "/");
    else
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || !realpath(parent, buf)) return 0;
    return snprintf(out, len, "%s/%s", strcmp(buf, "/") ? buf : "", name) < (int)len;
}

/* The canonical form of the deepest part of path that resolves, with the names after it kept as
 * written: where a write to path would land, whether or not its folders exist (so that the
 * answer for a path under an existing file, "Not a directory", cannot differ from the one for a
 * missing folder: no existence oracle). 0 for a relative path that does not resolve at all. */
static int landing_path(const char *path, char *out, size_t len) {
    char head[PATH_MAX], real[PATH_MAX];
    if (snprintf(head, sizeof head, "%s", path) >= (int)sizeof head) return 0;
    size_t n = strlen(head);
    while (n > 1 && head[n - 1] == '/')
        head[--n] = '\0';
    for (;;) {
        if (realpath(head[0] ? head : ".", real)) {
            const char *rest = path + strlen(head);
            while (*rest == '/')
                rest++;
            if (!*rest) return snprintf(out, len, "%s", real) < (int)len;
            /* ".." after a missing folder cannot be resolved: refused */
            size_t m = strlen(rest);
            if (!strcmp(rest, "..") || !strncmp(rest, "../", 3) || strstr(rest, "/../") ||
                (m >= 3 && !strcmp(rest + m - 3, "/..")))
                return 0;
            return snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", rest) < (int)len;
        }
        /* only a name that is not there is kept as written: one that is there but does not
         * resolve (a dangling symlink, which a write would follow out of the folder) is refused */
        struct stat st;
        if (head[0] && lstat(head, &st) == 0) return 0;
        char *slash = strrchr(head, '/');
        if (!slash) head[0] = '\0'; /* a relative name: resolve "." */
        else if (slash == head) head[1] = '\0';
        else *slash = '\0';
    }
}

static int under(const char *path, char *const *roots) {
    char p[PATH_MAX];
    if (!landing_path(path, p, sizeof p)) return 0;
    for (int i = 0; roots[i]; i++) {
        size_t n = strlen(roots[i]);
        if (!strncmp(p, roots[i], n) && (p[n] == '\0' || p[n] == '/' || !strcmp(roots[i], "/"))) return 1;
    }
    return 0;
}

int wb_lua_sandboxed(void) { return sandboxed; }

/* 1 with the message pushed when the sandbox refuses path, else 0 with nothing pushed. The message
 * names the path as written and the allowed folders, nothing found on the way to it: the same for
 * a path outside them that exists and one that does not (no existence oracle). */
static int push_refusal(lua_State *L, const char *path, int write, const char *what) {
    if (!sandboxed || under(path, write ? write_roots : read_roots)) return 0;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    char *const *roots = write ? write_roots : read_roots;
    for (int i = 0; roots[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, roots[i]);
    }
    luaL_pushresult(&b);
    lua_pushfstring(L, "%s: sandbox: may not %s '%s' (%s is allowed under %s)", what, write ? "write" : "read", path,
                    write ? "writing" : "reading", lua_tostring(L, -1));
    lua_remove(L, -2);
    return 1;
}

void wb_lua_check_path(lua_State *L, const char *path, int write, const char *what) {
    if (push_refusal(L, path, write, what)) wb_lua_raise(L, "%s", lua_tostring(L, -1));
}

static const char *checked_path(lua_State *L, const char *what) {
    if (lua_type(L, 1) != LUA_TSTRING) wb_lua_raise(L, "%s: needs a file path, got %s", what, luaL_typename(L, 1));
    return lua_tostring(L, 1);
}

/* wb._check_path(path, write, what): raises unless the sandbox (if any) allows it. */
static int l_check_path(lua_State *L) {
    const char *what = wb_lua_optstring(L, 3, "sandbox");
    wb_lua_check_path(L, checked_path(L, what), lua_toboolean(L, 2), what);
    return 0;
}

/* wb._path_refusal(path, write, what) -> nil where the sandbox (if any) allows it; else its
 * message and EACCES (what the kernel's Landlock answers), for the functions of standard Lua that
 * answer nil, message, errno for a file they cannot open (io.open, os.remove, os.rename). */
static int l_path_refusal(lua_State *L) {
    const char *what = wb_lua_optstring(L, 3, "sandbox");
    if (!push_refusal(L, checked_path(L, what), lua_toboolean(L, 2), what)) return 0;
    lua_pushinteger(L, EACCES);
    return 2;
}

static void set_roots(lua_State *L, int idx, char **roots) {
    wb_lua_checktable(L, idx);
    lua_Integer len = luaL_len(L, idx); /* a __len may answer anything: -1 would index roots[-1] */
    if (len < 0 || len > MAX_ROOTS) wb_lua_raise(L, "sandbox: %I folders given: 0 to %d are allowed", len, MAX_ROOTS);
    int n = (int)len;
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        char buf[PATH_MAX];
        const char *p = lua_tostring(L, -1);
        if (!p || !wb_lua_canonical_path(p, buf, sizeof buf)) wb_lua_raise(L, "sandbox: cannot resolve '%s'", p ? p : "?");
        roots[i - 1] = strdup(buf);
        lua_pop(L, 1);
    }
    roots[n] = NULL;
}

/* wb._sandbox_roots({read...}, {write...}): turns the checks on, once per process. */
static int l_sandbox_roots(lua_State *L) {
    if (sandboxed) return wb_lua_raise(L, "sandbox: already installed");
    set_roots(L, 1, read_roots);
    set_roots(L, 2, write_roots);
    sandboxed = 1;
    return 0;
}

/* wb._write_file(path, text, what) -> true, or nil, message: the whole text or nothing (a
 * temporary file beside path, every write checked, fsync, rename). */
static int l_write_file(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 1);
    size_t len;
    wb_lua_checkstring(L, 2);
    const char *text = lua_tolstring(L, 2, &len);
    const char *what = wb_lua_optstring(L, 3, "write");
    wb_lua_check_path(L, path, 1, what);
    wb_atomic_file a;
    wb_status st = wb_atomic_open(&a, path, what);
    if (st == WB_OK) {
        if (len && fwrite(text, 1, len, a.f) != len && !ferror(a.f)) errno = EIO;
        st = wb_atomic_commit(&a, what);
    }
    if (st != WB_OK) {
        lua_pushnil(L);
        lua_pushstring(L, wb_error_message());
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* A whole-or-nothing file written as it goes (wb._open_file): the temporary file beside the target
 * takes every write at once, so a long export holds no copy of its text; commit() renames it over
 * the target; one never committed (an error on the way) is removed when collected. */
#define STREAM_FILE "wb.stream_file"
typedef struct {
    wb_atomic_file a;
    int open;
    char what[64];
} stream_file;

static stream_file *check_stream(lua_State *L) {
    stream_file *s = luaL_testudata(L, 1, STREAM_FILE);
    if (!s) wb_lua_raise(L, "file: expected a file from wb._open_file, got %s", luaL_typename(L, 1));
    if (!s->open) wb_lua_raise(L, "%s: the file is already closed", s->what);
    return s;
}

/* wb._open_file(path, what) -> file, or nil, message */
static int l_open_file(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 1);
    const char *what = wb_lua_optstring(L, 2, "write");
    wb_lua_check_path(L, path, 1, what);
    stream_file *s = lua_newuserdatauv(L, sizeof *s, 0);
    s->open = 0;
    snprintf(s->what, sizeof s->what, "%s", what);
    luaL_setmetatable(L, STREAM_FILE);
    if (wb_atomic_open(&s->a, path, s->what) != WB_OK) {
        lua_pushnil(L);
        lua_pushstring(L, wb_error_message());
        return 2;
    }
    s->open = 1;
    return 1;
}

/* f:write(s, ...): strings (or numbers) appended; a failed write is told at commit */
static int l_stream_write(lua_State *L) {
    stream_file *s = check_stream(L);
    int n = lua_gettop(L);
    for (int i = 2; i <= n; i++) {
        size_t len;
        const char *text = luaL_tolstring(L, i, &len);
        if (len && fwrite(text, 1, len, s->a.f) != len && !ferror(s->a.f)) errno = EIO;
        wb_atomic_wrote(&s->a, len);
        lua_pop(L, 1);
    }
    lua_settop(L, 1);
    return 1;
}

/* f:commit() -> true, or nil, message (the target as it was) */
static int l_stream_commit(lua_State *L) {
    stream_file *s = check_stream(L);
    s->open = 0;
    if (wb_atomic_commit(&s->a, s->what) != WB_OK) {
        lua_pushnil(L);
        lua_pushstring(L, wb_error_message());
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int l_stream_gc(lua_State *L) {
    stream_file *s = luaL_checkudata(L, 1, STREAM_FILE);
    if (s->open) wb_atomic_abort(&s->a);
    s->open = 0;
    return 0;
}

static const luaL_Reg stream_methods[] = {
    {"write", l_stream_write},
    {"commit", l_stream_commit},
    {NULL, NULL},
};

static const luaL_Reg functions[] = {
    {"_check_path", l_check_path},
    {"_path_refusal", l_path_refusal},
    {"_sandbox_roots", l_sandbox_roots},
    {"_write_file", l_write_file},
    {"_open_file", l_open_file},
    {NULL, NULL},
};

void wb_lua_register_files(lua_State *L) {
    if (luaL_newmetatable(L, STREAM_FILE)) {
        luaL_newlib(L, stream_methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_stream_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, l_stream_gc);
        lua_setfield(L, -2, "__close");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, functions, 0);
}

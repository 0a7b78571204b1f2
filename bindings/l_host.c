/* l_host.c: what the library's Lua code needs from the host that plain Lua lacks: canonical
 * paths (the sandbox's checks), creating folders (results), the host name and the environment
 * variables that change measurements (fingerprints). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wb/host.h>

#include "wb_lua.h"

/* wb._realpath(path) -> the canonical absolute path (symlinks and .. resolved); for a path that
 * does not exist yet, the canonical parent folder plus the last name. nil, message otherwise. */
static int l_realpath(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 1);
    char buf[PATH_MAX];
    if (wb_lua_canonical_path(path, buf, sizeof buf)) {
        lua_pushstring(L, buf);
        return 1;
    }
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno ? errno : ENOENT));
    return 2;
}

/* wb._hostname() -> this machine's name (for results fingerprints; no file read needed). */
static int l_hostname(lua_State *L) {
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "?");
    buf[sizeof buf - 1] = '\0';
    lua_pushstring(L, buf);
    return 1;
}

extern char **environ;

/* wb._environment({prefix, ...}) -> {NAME = value, ...}: the environment variables whose names
 * start with one of the prefixes (plain Lua can read a variable it names, not list them). */
static int l_environment(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer count = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= count; i++) {
        if (lua_geti(L, 1, i) != LUA_TSTRING) return wb_lua_raise(L, "environment: prefix %d is not a string", (int)i);
        lua_pop(L, 1);
    }
    lua_newtable(L);
    for (char **e = environ; e && *e; e++) {
        const char *equals = strchr(*e, '=');
        if (!equals) continue;
        size_t name_len = (size_t)(equals - *e);
        for (lua_Integer i = 1; i <= count; i++) {
            lua_geti(L, 1, i);
            size_t prefix_len;
            const char *prefix = lua_tolstring(L, -1, &prefix_len);
            int match = prefix_len <= name_len && memcmp(*e, prefix, prefix_len) == 0;
            lua_pop(L, 1);
            if (match) {
                lua_pushlstring(L, *e, name_len);
                lua_pushstring(L, equals + 1);
                lua_rawset(L, -3);
                break;
            }
        }
    }
    return 1;
}

static int mkdir_failed(lua_State *L, const char *path, int err) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot create %s: %s", path, strerror(err));
    return 2;
}

/* wb._mkdir_p(path[, mode]) -> true, or nil, message: creates the folder and its parents (each one
 * it creates with mode, default 0777, less the umask; folders already there are left as they are).
 * A file where a folder should be is a failure (an experiment checks its --out before measuring).
 * The workbench's cache folder is made with 0700: code generation refuses one that others may use. */
static int l_mkdir_p(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 1);
    lua_Integer mode = luaL_optinteger(L, 2, 0777);
    if (mode < 0 || mode > 0777) return wb_lua_raise(L, "mkdir: mode must be 0 to 0777 (511), got %d", (int)mode);
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return mkdir_failed(L, path, ENAMETOOLONG);
    if (wb_lua_sandboxed() && strstr(path, "..")) return wb_lua_raise(L, "mkdir: sandbox: '..' in '%s'", path);
    /* the whole path first, as where it would land: refused the same way whether or not a file
     * exists on the way (else "Not a directory" would tell a sandboxed script that it does) */
    wb_lua_check_path(L, path, 1, "mkdir");
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            struct stat st;
            if (stat(buf, &st) != 0) wb_lua_check_path(L, buf, 1, "mkdir"); /* each folder it creates */
            if (mkdir(buf, (mode_t)mode) != 0) {
                if (errno != EEXIST) return mkdir_failed(L, buf, errno);
                if (stat(buf, &st) != 0) return mkdir_failed(L, buf, errno);
                if (!S_ISDIR(st.st_mode)) return mkdir_failed(L, buf, ENOTDIR);
            }
            *p = c;
            if (!c) break;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* wb._files(dir) -> the names of the regular files directly in dir (not followed through links),
 * in byte order (as LC_ALL=C sort), or nil, message. What merge and trace.load list a folder with:
 * `find` through popen is refused under --sandbox, this is a read of a folder the sandbox allows. */
static int l_files(lua_State *L) {
    const char *dir = wb_lua_checkstring(L, 1);
    wb_lua_check_path(L, dir, 0, "files");
    DIR *d = opendir(dir);
    if (!d) {
        lua_pushnil(L);
        lua_pushfstring(L, "cannot list %s: %s", dir, strerror(errno));
        return 2;
    }
    size_t n = 0, cap = 0;
    char **names = NULL;
    int failed = 0;
    struct dirent *e;
    while (!failed && (e = readdir(d))) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *names);
            if (!more) { failed = 1; break; }
            names = more;
        }
        if (!(names[n] = strdup(e->d_name))) failed = 1;
        else n++;
    }
    closedir(d);
    if (!failed) {
        if (n) qsort(names, n, sizeof *names, by_name); /* never a null base, even for no files */
        lua_createtable(L, (int)(n < INT_MAX ? n : INT_MAX), 0);
    }
    for (size_t i = 0; i < n; i++) {
        if (!failed) {
            lua_pushstring(L, names[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        free(names[i]);
    }
    free(names);
    if (failed) return wb_lua_raise(L, "files: out of memory listing %s", dir);
    return 1;
}

/* wb._private_dir(path) -> true, or nil and the reason: the folder (created 0700 where missing) is
 * this user's and no one else may use it (wb_host_private_dir): the calibration cache's check. */
static int l_private_dir(lua_State *L) {
    const char *dir = luaL_checkstring(L, 1);
    if (wb_host_private_dir(dir) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, wb_error_message());
    return 2;
}

static const luaL_Reg functions[] = {
    {"_files", l_files},
    {"_private_dir", l_private_dir},
    {"_realpath", l_realpath},
    {"_mkdir_p", l_mkdir_p},
    {"_hostname", l_hostname},
    {"_environment", l_environment},
    {"mkdir_p", l_mkdir_p},
    {NULL, NULL},
};

void wb_lua_register_host(lua_State *L) { luaL_setfuncs(L, functions, 0); }

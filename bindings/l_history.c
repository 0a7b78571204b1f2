/* l_history.c: SQLite for the results history (scripts/wb/history.lua holds the schema and all
 * the logic): wb._sqlite_open(path, readonly, busy_ms) -> a connection with exec, query and run
 * (prepared statements with bound parameters). Errors come back as nil, message, code name. */
#include <sqlite3.h>
#include <string.h>

#include "wb_lua.h"

#define SQLITE_DB_TYPE "wb.sqlite"

typedef struct sqlite_handle {
    sqlite3 *db; /* NULL once closed */
} sqlite_handle;

/* A short name for SQLite's primary result code: what the Lua side decides on. */
static const char *code_name(int code) {
    switch (code & 0xff) {
    case SQLITE_BUSY: return "busy";
    case SQLITE_LOCKED: return "locked";
    case SQLITE_READONLY: return "readonly";
    case SQLITE_CORRUPT: return "corrupt";
    case SQLITE_NOTADB: return "notadb";
    case SQLITE_CANTOPEN: return "cantopen";
    case SQLITE_FULL: return "full";
    case SQLITE_PERM: return "perm";
    case SQLITE_IOERR: return "ioerr";
    case SQLITE_CONSTRAINT: return "constraint";
    case SQLITE_NOMEM: return "nomem";
    default: return "error";
    }
}

static int push_failure(lua_State *L, sqlite3 *db, int code) {
    lua_pushnil(L);
    lua_pushstring(L, db ? sqlite3_errmsg(db) : sqlite3_errstr(code));
    lua_pushstring(L, code_name(db ? sqlite3_extended_errcode(db) : code));
    return 3;
}

static sqlite3 *check_open(lua_State *L) {
    sqlite_handle *h = wb_lua_checkudata(L, 1, SQLITE_DB_TYPE);
    if (!h->db) wb_lua_raise(L, "attempt to use a closed history database");
    return h->db;
}

/* wb._sqlite_open(path, readonly, busy_ms) -> db, or nil, message, code name. A missing file is
 * created unless readonly. busy_ms: how long a statement waits for another writer's lock. */
static int l_open(lua_State *L) {
    const char *path = wb_lua_checkstring(L, 1);
    int readonly = lua_toboolean(L, 2);
    lua_Integer busy_ms = wb_lua_optinteger(L, 3, 10000);
    sqlite_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->db = NULL;
    luaL_setmetatable(L, SQLITE_DB_TYPE);
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int n = push_failure(L, db, rc);
        sqlite3_close(db);
        return n;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, busy_ms < 0 ? 0 : busy_ms > 3600000 ? 3600000 : (int)busy_ms);
    h->db = db;
    return 1;
}

/* db:exec(sql) -> true, or nil, message, code: statements without parameters (schema, BEGIN). */
static int l_exec(lua_State *L) {
    sqlite3 *db = check_open(L);
    const char *sql = wb_lua_checkstring(L, 2);
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return push_failure(L, db, rc);
    lua_pushboolean(L, 1);
    return 1;
}

/* Binds the Lua values from index `first` on to the statement's ?s: integers, floats, strings,
 * booleans (0/1), nil (NULL). Returns 0, or raises for a table or function. */
static int bind_all(lua_State *L, sqlite3_stmt *st, int first) {
    int n = lua_gettop(L) - first + 1, want = sqlite3_bind_parameter_count(st);
    if (n != want) {
        sqlite3_finalize(st);
        return wb_lua_raise(L, "the statement has %d parameters, %d values given", want, n);
    }
    for (int i = 0; i < n; i++) {
        int idx = first + i, rc;
        switch (lua_type(L, idx)) {
        case LUA_TNIL: rc = sqlite3_bind_null(st, i + 1); break;
        case LUA_TBOOLEAN: rc = sqlite3_bind_int(st, i + 1, lua_toboolean(L, idx)); break;
        case LUA_TNUMBER:
            rc = lua_isinteger(L, idx) ? sqlite3_bind_int64(st, i + 1, lua_tointeger(L, idx))
                                       : sqlite3_bind_double(st, i + 1, lua_tonumber(L, idx));
            break;
        case LUA_TSTRING: {
            size_t len;
            const char *s = lua_tolstring(L, idx, &len);
            rc = sqlite3_bind_text(st, i + 1, s, (int)len, SQLITE_TRANSIENT);
            break;
        }
        default:
            sqlite3_finalize(st);
            return wb_lua_raise(L, "parameter %d is a %s (numbers, strings, booleans and nil only)", i + 1,
                                luaL_typename(L, idx));
        }
        if (rc != SQLITE_OK) {
            sqlite3_finalize(st);
            return wb_lua_raise(L, "parameter %d: %s", i + 1, sqlite3_errstr(rc));
        }
    }
    return 0;
}

static void push_column(lua_State *L, sqlite3_stmt *st, int c) {
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_INTEGER: lua_pushinteger(L, sqlite3_column_int64(st, c)); break;
    case SQLITE_FLOAT: lua_pushnumber(L, sqlite3_column_double(st, c)); break;
    case SQLITE_NULL: lua_pushnil(L); break;
    default: {
        const void *p = sqlite3_column_blob(st, c);
        lua_pushlstring(L, p ? p : "", (size_t)sqlite3_column_bytes(st, c));
    }
    }
}

/* Prepares sql with the parameters from index 3 on; NULL (and the failure pushed) on error. */
static sqlite3_stmt *prepare(lua_State *L, sqlite3 *db, int *nresults) {
    size_t len;
    const char *sql = luaL_checklstring(L, 2, &len);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, (int)len, &st, NULL);
    if (rc != SQLITE_OK) {
        *nresults = push_failure(L, db, rc);
        return NULL;
    }
    if (!st) wb_lua_raise(L, "empty statement");
    bind_all(L, st, 3);
    return st;
}

/* db:query(sql, ...) -> array of rows {column = value} (NULLs absent), or nil, message, code. */
static int l_query(lua_State *L) {
    sqlite3 *db = check_open(L);
    int nres = 0;
    sqlite3_stmt *st = prepare(L, db, &nres);
    if (!st) return nres;
    lua_newtable(L);
    int ncol = sqlite3_column_count(st), rc;
    lua_Integer n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        lua_createtable(L, 0, ncol);
        for (int c = 0; c < ncol; c++) {
            push_column(L, st, c);
            lua_setfield(L, -2, sqlite3_column_name(st, c));
        }
        lua_rawseti(L, -2, ++n);
    }
    if (rc != SQLITE_DONE) { /* (the message read before finalize) */
        push_failure(L, db, rc);
        sqlite3_finalize(st);
        return 3;
    }
    sqlite3_finalize(st);
    return 1;
}

/* db:run(sql, ...) -> rows changed, last inserted rowid; or nil, message, code. */
static int l_run(lua_State *L) {
    sqlite3 *db = check_open(L);
    int nres = 0;
    sqlite3_stmt *st = prepare(L, db, &nres);
    if (!st) return nres;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) { /* (the message read before finalize) */
        push_failure(L, db, rc);
        sqlite3_finalize(st);
        return 3;
    }
    sqlite3_finalize(st);
    lua_pushinteger(L, sqlite3_changes(db));
    lua_pushinteger(L, sqlite3_last_insert_rowid(db));
    return 2;
}

/* db:close(): also __gc and __close. An open transaction is rolled back (SQLite's rule). */
static int l_close(lua_State *L) {
    sqlite_handle *h = wb_lua_checkudata(L, 1, SQLITE_DB_TYPE);
    if (h->db) sqlite3_close_v2(h->db);
    h->db = NULL;
    return 0;
}

static int l_tostring(lua_State *L) {
    sqlite_handle *h = wb_lua_checkudata(L, 1, SQLITE_DB_TYPE);
    lua_pushstring(L, h->db ? "history database" : "history database (closed)");
    return 1;
}

static const luaL_Reg methods[] = {
    {"exec", l_exec}, {"query", l_query}, {"run", l_run}, {"close", l_close}, {NULL, NULL},
};

static const luaL_Reg metamethods[] = {
    {"__gc", l_close},
    {"__close", l_close},
    {"__tostring", l_tostring},
    {NULL, NULL},
};

void wb_lua_register_history(lua_State *L) {
    luaL_newmetatable(L, SQLITE_DB_TYPE);
    luaL_setfuncs(L, metamethods, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_open);
    lua_setfield(L, -2, "_sqlite_open");
}

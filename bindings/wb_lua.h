/* wb_lua.h: what the binding files share (l_aux.c): the tensor userdata, argument checks that
 * raise clear Lua errors, and turning a failed core status into a Lua error. */
#ifndef WB_LUA_H
#define WB_LUA_H

#include <lauxlib.h>
#include <lua.h>

#include <wb/wb.h>

#define WB_TENSOR_TYPE "wb.Tensor"

/* The userdata behind a Lua tensor; t is NULL once released. */
typedef struct wb_lua_tensor {
    wb_tensor *t;
} wb_lua_tensor;

/* The bindings' rule (checked by tests/test_callbacks.lua under ASan, and fuzzed by
 * tests/fuzz/fuzz_callbacks.lua). A script can run code in the middle of a binding: a table's
 * __len or __index (shapes, options), and a finalizer, which runs whenever Lua allocates (a
 * string, a table, a userdata, a tensor pushed). That code may release any object it can reach
 * (t:release(), getmetatable(x).__gc(x)). So a binding
 *   1. reads and converts every Lua argument into C values first (shapes, options, numbers,
 *      strings: the only steps that run script code);
 *   2. then fetches the objects (wb_lua_checktensor and the like run no script code);
 *   3. then calls the core; and
 *   4. pushes its results from C values copied out of the objects, or builds them under
 *      wb_lua_unfinalized; pushing the result tensor last is safe (the inputs are no longer read).
 * Nothing allocates Lua memory or runs script code while a raw pointer to an object is live; a
 * binding that must allocate in between (tolist's buffer) fetches the object again after. */
/* Every error raised for a script starts with the name of the function it called ("view: ...").
 * wb_lua_name_functions records the names of the functions of the module table at idx (two
 * levels: wb.openblas.matmul is "openblas.matmul") and the methods of every registered type;
 * wb_lua_fname is the running C function's name (NULL if unknown); wb_lua_raise formats like
 * lua_pushfstring, puts the name in front unless the message starts with it, and raises. */
void wb_lua_name_functions(lua_State *L, int idx);
/* Names f in messages, for what the walk above cannot reach (the methods of a type whose
 * __index is a function); call it before the walk, whose first-found names never replace it. */
void wb_lua_name_function(lua_State *L, lua_CFunction f, const char *name);
const char *wb_lua_fname(lua_State *L);
int wb_lua_raise(lua_State *L, const char *fmt, ...);
/* "<name>: bad argument #idx: expected <expected>, got <type>" */
int wb_lua_argerror(lua_State *L, int idx, const char *expected);
/* The lauxlib checks and options, with wb_lua_argerror's message. */
lua_Number wb_lua_checknumber(lua_State *L, int idx);
lua_Integer wb_lua_checkinteger(lua_State *L, int idx);
const char *wb_lua_checkstring(lua_State *L, int idx);
void wb_lua_checktable(lua_State *L, int idx);
const char *wb_lua_optstring(lua_State *L, int idx, const char *dflt);
lua_Integer wb_lua_optinteger(lua_State *L, int idx, lua_Integer dflt);
lua_Number wb_lua_optnumber(lua_State *L, int idx, lua_Number dflt);
void *wb_lua_checkudata(lua_State *L, int idx, const char *type);

/* Runs build (a C function given the binding's arguments) with the collector stopped, so that no
 * finalizer runs while build reads an object and pushes values from it (g:nodes(), s:events());
 * the collector is restarted even when build raises, and its error raised again. Returns build's
 * number of results. Name build (wb_lua_name_function) for its messages. */
int wb_lua_unfinalized(lua_State *L, lua_CFunction build);

/* Raises the core's last error message as a Lua error, named. Never returns. */
int wb_lua_error(lua_State *L);
/* Raises unless status is WB_OK. */
#define WB_LUA_CHECK(L, expr)                                                                                          \
    do {                                                                                                               \
        if ((expr) != WB_OK) wb_lua_error(L);                                                                          \
    } while (0)

/* The handle at idx when it is a tensor (possibly released), else NULL. */
wb_lua_tensor *wb_lua_testtensor(lua_State *L, int idx);
/* The handle at idx (possibly released); raises for another type. */
wb_lua_tensor *wb_lua_checkhandle(lua_State *L, int idx);
/* Records the tensor metatable at idx (wb_lua_open_tensor, once). */
void wb_lua_set_tensor_metatable(lua_State *L, int idx);
/* The tensor at idx; raises for another type and for a released tensor. */
wb_tensor *wb_lua_checktensor(lua_State *L, int idx);
/* Between two steps of a profiler session: runs the major collection that the next step would
 * meet (l_aux.c); the nanoseconds it took, 0 when none was due. */
uint64_t wb_lua_collect_between_steps(lua_State *L);
/* Pushes a new Lua tensor owning t (or frees t and raises if Lua cannot allocate). */
void wb_lua_pushtensor(lua_State *L, wb_tensor *t);
/* Raises on a failed status, else pushes *out: the "call core, push" pattern. `out` is read
 * only after the call has run (argument evaluation order is unspecified in C). */
int wb_lua_pushresult(lua_State *L, wb_status st, wb_tensor **out);

/* a OP b for tensors or numbers (numbers become 0-d tensors like the tensor operand): the
 * body of the arithmetic metamethods and of wb.add/sub/mul/div. */
typedef wb_status (*wb_lua_binary_fn)(wb_tensor *, wb_tensor *, wb_tensor **);
int wb_lua_binary(lua_State *L, wb_lua_binary_fn fn, const char *name);
/* wb_lua_add, wb_lua_sub, ..., wb_lua_neg: one function per op of <wb/abi/arith_list.h>,
 * registered as wb.<name>, t:<name>() and the tensor's metamethod (__add, ..., __unm). */
#define WB_LUA_ARITH_DECLARE(ID, name, ...) int wb_lua_##name(lua_State *L);
WB_BINARY_LIST(WB_LUA_ARITH_DECLARE)
WB_ARITH_UNARY_LIST(WB_LUA_ARITH_DECLARE)
#undef WB_LUA_ARITH_DECLARE

/* Shapes: a table {2, 3} (or a single integer for 1-D). Returns ndim. */
int wb_lua_checkshape(lua_State *L, int idx, int64_t *shape, const char *fname, const char *what);
/* A 1-based or negative dimension of t, as a 0-based index; raises when out of range. */
int wb_lua_checkdim(lua_State *L, int idx, const wb_tensor *t, const char *fname);
/* The same for a dimension already read as an integer d. */
int wb_lua_todim(lua_State *L, int64_t d, const wb_tensor *t, const char *fname);
/* An integer argument; raises with the function and argument name otherwise. */
int64_t wb_lua_checkint(lua_State *L, int idx, const char *fname, const char *what);
/* {dtype=, device=} options (idx may be none or nil); unknown keys raise. */
void wb_lua_checkopts(lua_State *L, int idx, const char *fname, wb_dtype *dtype, wb_device *device);
/* Raises unless every key of the table at idx is listed in `allowed` (NULL-terminated). */
void wb_lua_checkkeys(lua_State *L, int idx, const char *fname, const char *const *allowed);

/* t[key] = v for the table on top of the stack. */
void wb_lua_setstring(lua_State *L, const char *key, const char *v);
void wb_lua_setnumber(lua_State *L, const char *key, lua_Number v);
void wb_lua_setinteger(lua_State *L, const char *key, lua_Integer v);

int wb_lua_open_tensor(lua_State *L);        /* registers the metatable; leaves nothing on the stack */
void wb_lua_register_ops(lua_State *L);      /* adds op functions to the table on top */
void wb_lua_register_reductions(lua_State *L); /* t:sum(), t:mean(), t:max() (l_reduce.c) */
void wb_lua_register_creation(lua_State *L); /* adds creation functions to the table on top */
void wb_lua_register_profiler(lua_State *L); /* the session type; functions on the table on top */
void wb_lua_register_profiler_events(lua_State *L); /* _profiler_from_events on the table on top */
/* Whether a chunk (lua_Debug's source, "@path" for a file) is one of the library's own scripts:
 * its folder, resolved, is the library's scripts/wb (l_profiler.c; the REPL's error positions too). */
int wb_lua_in_library(lua_State *L, const char *source);
void wb_lua_register_graph(lua_State *L);    /* the graph type; wb.graph on the table on top */
void wb_lua_register_codegen(lua_State *L); /* wb.codegen on the table on top */
void wb_lua_register_host(lua_State *L);     /* wb._realpath, _mkdir_p, _hostname, _environment on the table on top */
void wb_lua_register_calibrate(lua_State *L); /* wb._read_gbs ...; wb.device_info via wb.calibrate */
void wb_lua_register_files(lua_State *L);    /* wb._check_path, _path_refusal, _write_file, ... (l_files.c) */
void wb_lua_register_history(lua_State *L);  /* wb._sqlite_open: SQLite for wb.history (l_history.c) */
void wb_lua_register_peers(lua_State *L);    /* wb.blis, wb.dnnl: comparison peers (l_peers.c) */

/* --sandbox's one check (l_files.c): raises "<what>: sandbox: may not write '<path>' ..." unless
 * the sandbox is off or allows it. Every writer calls it, native ones included. */
void wb_lua_check_path(lua_State *L, const char *path, int write, const char *what);
int wb_lua_sandboxed(void);
/* path with symlinks and .. resolved (a missing last name is kept): 0 when it does not resolve */
int wb_lua_canonical_path(const char *path, char *out, size_t len);

int luaopen_wb(lua_State *L);

#endif

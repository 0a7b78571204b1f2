/* main.c: the workbench executable. Parses the command line (docs/cli.md),
 * opens Lua with `wb` as a global, sets `arg` as the standalone lua does, then runs -e
 * statements, the script (or stdin) and the REPL. A script error prints a traceback and the
 * process exits non-zero. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "guard.h"
#include "repl.h"
#include "wb_lua.h"
#include "wb_version.h"
#include <wb/host.h> /* WB_GEMM_BLOCKING, refused before any script runs */

/* Where the interpreter comes from, for --version: the sanitizer build compiles Lua's source
 * into the executable with its own flags, so AddressSanitizer sees inside the interpreter. */
#if defined(WB_LUA_BUILT_HERE) && defined(WB_SANITIZE_BUILD)
#define LUA_ORIGIN " built from source with ASan+UBSan"
#elif defined(WB_LUA_BUILT_HERE)
#define LUA_ORIGIN " built from source"
#else
#define LUA_ORIGIN ", system library"
#endif

static const char usage[] =
    "usage: workbench [options] [script.lua | -] [script args...]\n"
    "       workbench compare [options] A.json B.json   (row by row; compare --help lists the options)\n"
    "       workbench merge [--history] OUT FILES|DIRS...   (join the shards of one wb.sweep run)\n"
    "       workbench explain TRACE.json [--json]   (the findings of a trace: the workbench's, torch.profiler's)\n"
    "       workbench history add|list|show|check|report|gc [--db PATH]   (past results; history --help)\n"
    "       workbench diff A.json B.json   (two traces node by node; diff --help lists the options)\n"
    "       workbench diff --ab A.lua B.lua   (two scripts' steps profiled interleaved, then diffed)\n"
    "\n"
    "Runs a Lua experiment script with the `wb` library loaded (`-` reads the script from stdin).\n"
    "With no script: the REPL on a terminal, otherwise the script read from stdin.\n"
    "\n"
    "options:\n"
    "  -e STMT          run a Lua statement (repeatable; runs before the script)\n"
    "  -i               enter the REPL after running the script\n"
    "  --device DEV     default device: cpu, cuda or auto (default: auto)\n"
    "  --threads N      CPU threads for kernels (default: all cores)\n"
    "  --out DIR        where results and traces go, wb.options.out (default: out/<script>/<timestamp>-<pid>)\n"
    "  --seed N         seed of the random generator\n"
    "  --sandbox        run a script from someone else: no processes, no C modules, no binary chunks,\n"
    "                   reads under the script's folder and the library, writes under --out only\n"
    "                   (enforced by the kernel: Landlock, seccomp; refused on a kernel without Landlock)\n"
    "  --sandbox-weak   --sandbox where the kernel lacks Landlock: the library's checks and seccomp only\n"
    "  --max-memory SIZE  limit the address space (like 512M or 4G, or none; default under --sandbox: 8G)\n"
    "  --timeout SECS   stop the script after SECS seconds (a hard exit 1 s later if it does not stop)\n"
    "  --version        print the version and exit\n"
    "  -h, --help       print this help and exit\n"
    "  --               stop reading options\n"
    "\n"
    "environment:\n"
    "  WB_CPU_ISA=avx512|avx2|scalar             force the CPU kernel path\n"
    "  WB_CPU_BF16=auto|avx512bf16|avx2bf16|widen|emulated   force the bf16 GEMM path\n"
    "  WB_GEMM_BLOCKING=kc,mc,nc | caches:L1,L2,L3SHARE   force the GEMM's cache blocking (tests)\n"
    "  WB_CUDA_PLUGIN=PATH                       load this CUDA plugin (default: libwb_cuda.so next to workbench)\n"
    "  WB_DEVICE=cpu|cuda|auto                   the default device when --device is not given (default: auto)\n";

typedef struct options {
    const char **exprs;
    int nexpr;
    int interactive;
    const char *device;
    const char *threads;
    const char *out;
    const char *seed;
    const char *timeout;
    const char *max_memory;
    int sandbox;
    int sandbox_weak;
    int script_index;       /* argv index of the script (or "-"); 0 when none */
    const char *subcommand; /* "compare", "merge", "explain", "history" or "diff": a Lua module's main() does the work */
    int subcommand_index;   /* its place in argv (2 after --sandbox) */
} options;

static int fail_usage(const char *fmt, const char *what) {
    fprintf(stderr, "workbench: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n(run 'workbench --help' for the options)\n");
    return 2;
}

/* Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, options *o) {
    o->exprs = calloc((size_t)argc, sizeof(char *));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **value = NULL;
        if (!strcmp(a, "--")) {
            if (i + 1 < argc) o->script_index = i + 1;
            return -1;
        }
        if (!strcmp(a, "-") || a[0] != '-') {
            /* a subcommand comes first, or after --sandbox alone (`workbench --sandbox diff --ab`) */
            if (i == 1 + o->sandbox && (!strcmp(a, "compare") || !strcmp(a, "merge") || !strcmp(a, "explain") ||
                                        !strcmp(a, "history") || !strcmp(a, "diff"))) {
                o->subcommand = a;
                o->subcommand_index = i;
                return -1;
            }
            o->script_index = i;
            return -1;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            printf("workbench %s (commit %s, %s%s)\n", WB_VERSION, WB_GIT_COMMIT, LUA_RELEASE, LUA_ORIGIN);
            return 0;
        }
        if (!strcmp(a, "-i")) {
            o->interactive = 1;
            continue;
        }
        if (!strcmp(a, "--sandbox") || !strcmp(a, "--sandbox-weak")) {
            o->sandbox = 1;
            o->sandbox_weak |= !strcmp(a, "--sandbox-weak");
            continue;
        }
        if (!strncmp(a, "-e", 2)) {
            if (a[2]) {
                o->exprs[o->nexpr++] = a + 2;
                continue;
            }
            if (i + 1 >= argc) return fail_usage("%s needs a statement", a);
            o->exprs[o->nexpr++] = argv[++i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        if (!strncmp(a, "--device", name_len) && name_len == 8)
            value = &o->device;
        else if (!strncmp(a, "--threads", name_len) && name_len == 9)
            value = &o->threads;
        else if (!strncmp(a, "--out", name_len) && name_len == 5)
            value = &o->out;
        else if (!strncmp(a, "--seed", name_len) && name_len == 6)
            value = &o->seed;
        else if (!strncmp(a, "--timeout", name_len) && name_len == 9)
            value = &o->timeout;
        else if (!strncmp(a, "--max-memory", name_len) && name_len == 12)
            value = &o->max_memory;
        else
            return fail_usage("unknown option '%s'", a);
        if (eq)
            *value = eq + 1;
        else if (i + 1 < argc)
            *value = argv[++i];
        else
            return fail_usage("%s needs a value", a);
    }
    return -1;
}

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* scripts/ of the library: $WB_SCRIPTS_DIR, next to the executable's folder (a build tree inside
 * the checkout), or the source tree it was built from. */
static void scripts_dir(char *buf, size_t len) {
    const char *env = getenv("WB_SCRIPTS_DIR");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    if (wb_executable_dir(exe, sizeof exe) && snprintf(buf, len, "%s/../scripts/wb", exe) < (int)len && is_dir(buf) &&
        snprintf(buf, len, "%s/../scripts", exe) < (int)len)
        return;
    snprintf(buf, len, "%s/scripts", WB_SOURCE_DIR);
}

/* Pushes the entries of a search path (';'-separated) but those of the current folder itself
 * ("./?.lua", "./?/init.lua", "./?.so": Lua's defaults, which would find modules in whatever
 * folder the command runs in; or "?.lua"). Other entries, LUA_PATH's relative ones included, stay
 * as the user wrote them. */
static void push_entries_but_current_folder(lua_State *L, const char *path) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int first = 1;
    for (const char *p = path ? path : ""; *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && strncmp(p, "./?", 3) && p[0] != '?') {
            if (!first) luaL_addchar(&b, ';');
            luaL_addlstring(&b, p, len), first = 0;
        }
        p += len + (end != NULL);
    }
    luaL_pushresult(&b);
}

/* package.preload.cjson: the library's C module through Lua's C searcher (package.searchers[3])
 * alone, so that no Lua file (a cjson.lua beside a script, or in the folder) can stand for it;
 * upvalue 1 is the package table. Loaded when first required, as before (loading it at start made
 * LeakSanitizer's exit check crash on a dynamic TLS block in the ASan build). */
static int cjson_preload(lua_State *L) {
    lua_getfield(L, lua_upvalueindex(1), "searchers");
    if (lua_type(L, -1) != LUA_TTABLE || lua_rawgeti(L, -1, 3) != LUA_TFUNCTION)
        return luaL_error(L, "module 'cjson': package.searchers has no C searcher");
    lua_pushstring(L, "cjson");
    lua_call(L, 1, 2);
    if (lua_type(L, -2) != LUA_TFUNCTION)
        return luaL_error(L, "module 'cjson' (the library's JSON, lua-cjson) cannot be loaded: %s",
                          lua_isstring(L, -2) ? lua_tostring(L, -2) : "not found");
    lua_pushstring(L, "cjson");
    lua_insert(L, -2); /* loader, "cjson", where */
    lua_call(L, 2, 1);
    return 1;
}

/* Where require looks: the library's scripts, then Lua's paths (and LUA_PATH / LUA_CPATH's) but
 * the current folder, then the script's own folder; never the current folder. The library's C
 * module (cjson) is found by the C searcher alone (cjson_preload): Lua's searcher runs before the
 * C one, so a cjson.lua beside a script would otherwise be what the library (and the sandbox,
 * which loads it before it closes) gets. */
static void set_package_path(lua_State *L, const char *script) {
    char dir[PATH_MAX];
    scripts_dir(dir, sizeof dir);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    push_entries_but_current_folder(L, lua_tostring(L, -1));
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -4, "path");
    lua_pop(L, 2);
    lua_getfield(L, -1, "cpath");
    push_entries_but_current_folder(L, lua_tostring(L, -1));
    lua_setfield(L, -3, "cpath");
    lua_pop(L, 1);
    wb_lua_setstring(L, "wb_scripts_dir", dir);
    lua_getfield(L, -1, "preload");
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, cjson_preload, 1);
    lua_setfield(L, -2, "cjson");
    lua_pop(L, 1);
    char folder[PATH_MAX] = "";
    const char *slash = script ? strrchr(script, '/') : NULL;
    if (script && strcmp(script, "-"))
        snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - script) : 1, slash ? script : ".");
    /* (a folder whose name holds Lua's path characters cannot be one of its entries: not searched) */
    if (script && strcmp(script, "-") && !strpbrk(folder, ";?")) {
        lua_getfield(L, -1, "path");
        lua_pushfstring(L, "%s;%s/?.lua;%s/?/init.lua", lua_tostring(L, -1), folder, folder);
        lua_setfield(L, -3, "path");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* arg[0] is the script, arg[1..] its arguments, arg[-n..-1] the interpreter and options; with
 * no script the interpreter is arg[0] (as the standalone lua does). */
static void set_arg(lua_State *L, int argc, char **argv, int script_index) {
    lua_createtable(L, argc - script_index, script_index + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script_index);
    }
    lua_setglobal(L, "arg");
}

static int run_options(lua_State *L, const options *o) {
    lua_getglobal(L, "wb");
    lua_newtable(L); /* wb.options: what the command line asked for */
    /* --device, else $WB_DEVICE, else auto: cuda when a GPU is usable (the cuda backend answers
     * at once where there is no driver), else cpu */
    const char *env_device = getenv("WB_DEVICE");
    const char *device = o->device ? o->device : env_device && *env_device ? env_device : "auto";
    const char *source = o->device ? "--device" : env_device && *env_device ? "WB_DEVICE=" : NULL;
    if (source) {
        wb_device dev;
        if (wb_device_parse(device, &dev)) { /* a bad option: status 2, as for the others */
            fprintf(stderr, "workbench: %s%s%s: %s\n", source, o->device ? " " : "", device, wb_error_message());
            return 2;
        }
        if (wb_set_default_device(dev)) { /* a device this machine cannot run: a failure, status 1 */
            fprintf(stderr, "workbench: %s%s%s: %s\n", source, o->device ? " " : "", device, wb_error_message());
            return 1;
        }
    } else {
        wb_device dev = WB_DEVICE_CPU;
        if (wb_device_parse("auto", &dev) == WB_OK) wb_set_default_device(dev);
    }
    wb_lua_setstring(L, "device", wb_device_name(wb_default_device()));
    if (o->threads) {
        long long n;
        if (!parse_int(o->threads, 1, WB_MAX_THREADS, &n)) {
            fprintf(stderr, "workbench: --threads %s: expected a whole number from 1 to %d\n", o->threads, WB_MAX_THREADS);
            return 2;
        }
        if (wb_set_num_threads((int)n) != WB_OK) { /* no OpenMP, or the stacks do not fit --max-memory */
            fprintf(stderr, "workbench: --threads %s: %s\n", o->threads, wb_error_message());
            return 2;
        }
    }
    wb_lua_setinteger(L, "threads", wb_get_num_threads());
    if (o->seed) {
        long long seed;
        if (!parse_int(o->seed, 0, LLONG_MAX, &seed)) {
            fprintf(stderr, "workbench: --seed %s: expected a whole number >= 0\n", o->seed);
            return 2;
        }
        wb_manual_seed((uint64_t)seed);
        wb_lua_setinteger(L, "seed", seed);
    }
    if (o->out) {
        if (!*o->out) { /* "" would reach mkdir as "cannot create : No such file or directory" */
            fprintf(stderr, "workbench: --out: expected a folder, got an empty value\n");
            return 2;
        }
        wb_lua_setstring(L, "out", o->out);
    }
    lua_setfield(L, -2, "options");
    lua_pop(L, 1);
    return 0;
}

static int run_chunk(lua_State *L, int status, int nargs_from, int argc, char **argv) {
    if (status != LUA_OK) {
        fprintf(stderr, "workbench: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        return 1;
    }
    int nargs = nargs_from > 0 && nargs_from < argc ? argc - nargs_from : 0;
    /* The script's arguments go on the stack as `...`: this C frame is promised LUA_MINSTACK
     * (20) slots only, so room for them and the message handler is asked for first (without
     * it, 40-odd arguments wrote past the end of the stack). */
    if (!lua_checkstack(L, nargs + 2)) {
        fprintf(stderr, "workbench: too many arguments for the script (%d)\n", nargs);
        lua_pop(L, 1);
        return 1;
    }
    for (int i = 0; i < nargs; i++)
        lua_pushstring(L, argv[nargs_from + i]);
    if (wb_lua_docall(L, nargs, 0) == LUA_OK) return 0;
    return wb_lua_interrupted() ? 130 : 1; /* 128 + SIGINT, as a shell reports Ctrl-C */
}

/* out/<name>/<time>-<pid> (created when used; the process id keeps runs started in the same second
 * apart: they shared a folder, and one's results replaced the other's) */
static const char *format_default_out(char *buf, size_t len, const char *name, int name_len) {
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    snprintf(buf, len, "out/%.*s/%s-%ld", name_len, name, stamp, (long)getpid());
    return buf;
}

/* wb._enter_sandbox(script_a, script_b, out, weak) -> true, or false (the reason printed): the
 * --sandbox policy for `workbench diff --ab --sandbox` (both scripts' folders read, writes under
 * out) and its default 8G address-space limit; from then on as for a sandboxed script. */
static int enter_sandbox(lua_State *L) {
    const char *a = luaL_checkstring(L, 1), *b = luaL_checkstring(L, 2), *out = luaL_checkstring(L, 3);
    int weak = lua_toboolean(L, 4);
    lua_settop(L, 4);
    int rc = wb_guard_sandbox(L, a, b, out, weak);
    if (rc == 0) rc = wb_guard_memory("8G", 0);
    lua_pushboolean(L, rc == 0);
    return 1;
}

int main(int argc, char **argv) {
    options o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) {
        free(o.exprs);
        return rc;
    }
    const char *blocking = wb_host_blocking_env_error(); /* never a silent fall back to the rule */
    if (blocking) {
        fprintf(stderr, "workbench: %s\n", blocking);
        free(o.exprs);
        return 2;
    }
    const char *const cpu_vars[] = {"WB_CPU_ISA", "WB_CPU_BF16"}; /* a typo refused; a path the CPU lacks said */
    for (int i = 0; i < 2; i++) {
        int fatal;
        const char *why = wb_host_cpu_env_error(cpu_vars[i], &fatal);
        if (why) fprintf(stderr, "workbench: %s\n", why);
        if (fatal) {
            free(o.exprs);
            return 2;
        }
    }
    lua_State *L = lua_newstate(wb_lua_alloc, NULL);
    if (!L) {
        fprintf(stderr, "workbench: cannot create a Lua state (out of memory)\n");
        return 1;
    }
    luaL_openlibs(L);
    /* Generational collection: eager code makes one short-lived tensor per op, and the young
     * generation frees them for about half the cost of incremental cycles (a 1-element add from
     * Lua: ~850 -> ~440 ns on the development machine). */
    lua_gc(L, LUA_GCGEN, 0, 0);
    set_package_path(L, o.subcommand || !o.script_index ? NULL : argv[o.script_index]);
    luaL_requiref(L, "wb", luaopen_wb, 1);
    lua_pop(L, 1);
    set_arg(L, argc, argv, o.script_index);
    if (o.subcommand) { /* scripts/wb/cmd/<subcommand>.lua does the work; its main() returns the exit status */
        if (o.sandbox && strcmp(o.subcommand, "diff")) {
            fprintf(stderr, "workbench: --sandbox runs a script (or diff --ab's two scripts), not %s\n", o.subcommand);
            lua_close(L);
            free(o.exprs);
            return 2;
        }
        /* diff --ab --sandbox: the command enters the sandbox once it knows the two scripts */
        lua_getglobal(L, "wb");
        lua_pushcfunction(L, enter_sandbox);
        lua_setfield(L, -2, "_enter_sandbox");
        char out[PATH_MAX]; /* and where it writes when not told: out/<command>/<time>-<pid> */
        format_default_out(out, sizeof out, o.subcommand, (int)strlen(o.subcommand));
        wb_lua_setstring(L, "_default_out", out);
        lua_pop(L, 1);
        lua_getglobal(L, "require");
        lua_pushfstring(L, "wb.cmd.%s", o.subcommand);
        rc = wb_lua_docall(L, 1, 1) == LUA_OK ? 0 : 2;
        if (rc == 0) {
            lua_getfield(L, -1, "main");
            lua_createtable(L, argc - 1, 0);
            int n = 0;
            if (o.sandbox) { /* `workbench --sandbox diff ...` is `workbench diff --sandbox ...` */
                lua_pushstring(L, o.sandbox_weak ? "--sandbox-weak" : "--sandbox");
                lua_rawseti(L, -2, ++n);
            }
            for (int i = o.subcommand_index + 1; i < argc; i++) {
                lua_pushstring(L, argv[i]);
                lua_rawseti(L, -2, ++n);
            }
            rc = wb_lua_docall(L, 1, 1) == LUA_OK ? (int)lua_tointeger(L, -1) : 2;
        }
        lua_close(L);
        free(o.exprs);
        return rc;
    }
    char default_out[PATH_MAX];
    if (o.sandbox && (!o.script_index || !strcmp(argv[o.script_index], "-"))) {
        fprintf(stderr, "workbench: --sandbox runs a script file: give its path\n");
        lua_close(L);
        free(o.exprs);
        return 2;
    }
    if (!o.out) { /* the default --help states, in wb.options.out */
        const char *script = o.script_index ? argv[o.script_index] : NULL;
        const char *base = !script ? "repl" : !strcmp(script, "-") ? "stdin" : strrchr(script, '/');
        base = base ? (base[0] == '/' ? base + 1 : base) : script;
        int n = (int)strcspn(base, ".");
        o.out = format_default_out(default_out, sizeof default_out, base, n ? n : (int)strlen(base));
    }
    rc = run_options(L, &o);
    if (rc == 0 && o.timeout) rc = wb_guard_timeout(L, o.timeout);
    if (rc == 0 && o.sandbox) rc = wb_guard_sandbox(L, argv[o.script_index], NULL, o.out, o.sandbox_weak);
    if (rc == 0 && (o.max_memory || o.sandbox)) rc = wb_guard_memory(o.max_memory ? o.max_memory : "8G", o.max_memory != NULL);
    /* the threads' stacks checked under that limit: the first parallel kernel would otherwise end
     * the process (libgomp's "Thread creation failed", past any error handling) */
    if (rc == 0 && (o.max_memory || o.sandbox) && wb_set_num_threads(wb_threads_requested()) != WB_OK) {
        if (o.threads) { /* asked for: an error */
            fprintf(stderr, "workbench: --threads %s: %s\n", o.threads, wb_error_message());
            rc = 2;
        } else { /* the default: the most that fit, said (1 always fits: no workers) */
            int n = wb_threads_requested();
            while (n > 1 && wb_set_num_threads(n) != WB_OK)
                n--;
            wb_set_num_threads(n);
            fprintf(stderr, "workbench: the memory limit leaves room for %d %s: running on %d (--threads to choose)\n",
                    n, n == 1 ? "thread's stack" : "threads' stacks", n);
        }
    }
    for (int i = 0; rc == 0 && i < o.nexpr; i++)
        rc = run_chunk(L, luaL_loadbuffer(L, o.exprs[i], strlen(o.exprs[i]), "=(command line)"), 0, argc, argv);
    if (rc == 0) {
        if (o.script_index) {
            const char *script = argv[o.script_index];
            int from_stdin = !strcmp(script, "-");
            /* a sandboxed script must be text: a precompiled chunk could carry arbitrary bytecode */
            rc = run_chunk(L, luaL_loadfilex(L, from_stdin ? NULL : script, o.sandbox ? "t" : NULL), o.script_index + 1,
                           argc, argv);
        } else if (o.nexpr == 0 && !o.interactive) {
            if (isatty(STDIN_FILENO))
                wb_repl_run(L);
            else
                rc = run_chunk(L, luaL_loadfile(L, NULL), 0, argc, argv);
        }
    }
    if (rc == 0 && o.interactive) wb_repl_run(L);
    lua_close(L);
    free(o.exprs);
    return rc;
}

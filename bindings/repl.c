/* repl.c: the read-eval-print loop. Tries `return <line>` first so an expression's value prints
 * (tables as values through scripts/wb/pretty.lua; a trailing ';' silences it); keeps reading
 * while the chunk is incomplete; an error prints its message and the script position (the full
 * traceback on request: traceback()) and the loop goes on; a long statement shows its wall time.
 * With readline on a terminal: line editing, a history file (~/.workbench_history), tab
 * completion of globals, table fields, methods and fields found through metatables
 * (x:transp<Tab> -> x:transpose, x.sh<Tab> -> x.shape) and the library's lazily loaded modules
 * (wb.prof<Tab>), Ctrl-C that stops a running statement (or drops the chunk being typed), Ctrl-D
 * to leave. */
#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include <wb/clock.h>
#include "guard.h"
#include "repl.h"
#include "wb_lua.h"
#ifdef WB_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

static lua_State *repl_state;
static volatile sig_atomic_t interrupted_at_prompt;

static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Ctrl-C while Lua runs. Every call arms one count hook on its state (wb_lua_hook, every
 * HOOK_COUNT instructions, a C call each time, kept for this: a coroutine inherits it, so one
 * running at Ctrl-C sees it too), and the signal makes the main state's hook run at its next
 * instruction. The first Ctrl-C raises "interrupted!" once, in whichever thread runs: a script may
 * catch it (wb.sweep saves what it measured, then raises it again). The second raises at every
 * hook event of every thread it reaches until the call ends, as --timeout does: no pcall keeps
 * the script running (nor wb.sweep's save: it is cut short). The third exits at once (status 130,
 * the REPL too), for a call stuck where no hook runs (a long C call). A call inside a call (the
 * sandbox's set-up inside diff --ab's) shares the outer one's count. */
#define HOOK_COUNT 1000
static volatile sig_atomic_t interrupts; /* Ctrl-Cs during the current outermost docall */
static volatile sig_atomic_t interrupt_raised;
static int call_depth, call_interrupted; /* docalls running; whether Ctrl-C came during the last */

void wb_lua_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    wb_guard_check(L); /* --timeout */
    if (interrupts >= 2 || (interrupts == 1 && !interrupt_raised)) {
        if (!interrupt_raised && repl_state) /* the main state back to the count */
            lua_sethook(repl_state, wb_lua_hook, LUA_MASKCOUNT, HOOK_COUNT);
        interrupt_raised = 1;
        if (interrupts >= 2) wb_lua_hook_now(L); /* a coroutine's hook at every event too */
        luaL_error(L, "interrupted!");
    }
}

void wb_lua_hook_now(lua_State *L) {
    if (L) lua_sethook(L, wb_lua_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static void on_sigint_running(int sig) {
    (void)sig;
    if (interrupts >= 2) {
        static const char msg[] = "workbench: interrupted (Ctrl-C, a third time): exiting\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)ignored;
        _exit(130);
    }
    interrupts++;
    wb_lua_hook_now(repl_state);
}

int wb_lua_interrupted(void) { return call_interrupted; }

/* ---- errors in the REPL: the message and where in the user's code; the traceback is kept ---- */

#define LAST_TRACEBACK "wb.repl.last_traceback"
static int full_tracebacks; /* traceback(true): errors print the whole traceback */

/* "file:line" of the innermost Lua frame outside the library's own scripts (scripts/wb/). */
static int script_position(lua_State *L, char *buf, size_t len) {
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.currentline <= 0 || wb_lua_in_library(L, ar.source)) continue;
        snprintf(buf, len, "%s:%d:", ar.short_src, ar.currentline);
        return 1;
    }
    return 0;
}

static int repl_message(lua_State *L) {
    if (!lua_tostring(L, 1)) {
        if (!luaL_callmeta(L, 1, "__tostring") || lua_type(L, -1) != LUA_TSTRING)
            lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
        lua_replace(L, 1);
    }
    const char *msg = lua_tostring(L, 1);
    luaL_traceback(L, L, msg, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, LAST_TRACEBACK);
    if (full_tracebacks) return 1;
    char where[512];
    if (script_position(L, where, sizeof where) && strncmp(msg, where, strlen(where)))
        lua_pushfstring(L, "%s %s", where, msg);
    else
        lua_pushvalue(L, 1);
    return 1;
}

/* traceback(): prints the last error's traceback; traceback(true|false): whether errors print it
 * in full from now on. */
static int l_traceback(lua_State *L) {
    if (lua_gettop(L) > 0) {
        if (!lua_isboolean(L, 1)) return luaL_error(L, "traceback: expected true, false or nothing");
        full_tracebacks = lua_toboolean(L, 1);
        printf("errors now print %s\n", full_tracebacks ? "the full traceback" : "their message and position");
        return 0;
    }
    if (lua_getfield(L, LUA_REGISTRYINDEX, LAST_TRACEBACK) == LUA_TSTRING)
        puts(lua_tostring(L, -1));
    else
        puts("no error yet");
    return 0;
}

static int docall_with(lua_State *L, int nargs, int nresults, lua_CFunction handler) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, handler);
    lua_insert(L, base);
    repl_state = L;
    if (call_depth++ == 0) {
        interrupts = 0, interrupt_raised = 0;
        lua_sethook(L, wb_lua_hook, LUA_MASKCOUNT, HOOK_COUNT);
    }
    void (*previous)(int) = signal(SIGINT, on_sigint_running);
    int status = lua_pcall(L, nargs, nresults, base);
    signal(SIGINT, previous);
    call_interrupted = interrupts > 0;
    if (--call_depth == 0) { /* Lua run between calls (the REPL's printer, completion) sees no Ctrl-C */
        lua_sethook(L, wb_lua_hook, LUA_MASKCOUNT, HOOK_COUNT); /* back to the count (the timeout's check too) */
        interrupts = 0, interrupt_raised = 0;
    }
    lua_remove(L, base);
    return status;
}

/* Lua's memory error is the bare "not enough memory", with no traceback (the message handler
 * does not run for it): say where the limit came from when the process has one. */
static void report_memory_error(void) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
        fprintf(stderr, "workbench: not enough memory: the interpreter could not allocate within the address space "
                        "limit of %llu MiB (--max-memory; 8G by default under --sandbox)\n",
                (unsigned long long)(lim.rlim_cur >> 20));
    else
        fprintf(stderr, "workbench: not enough memory: the interpreter could not allocate\n");
}

int wb_lua_docall(lua_State *L, int nargs, int nresults) {
    int status = docall_with(L, nargs, nresults, traceback);
    if (status == LUA_ERRMEM) {
        report_memory_error();
        fflush(stderr);
        lua_pop(L, 1);
    } else if (status != LUA_OK && call_interrupted) {
        /* Ctrl-C: what was interrupted, in one line (a wb.sweep says what it saved), no traceback;
         * the hook's own error, with or without a position in front, as the line below */
        const char *msg = lua_tostring(L, -1);
        const char *end = msg ? strstr(msg, "\nstack traceback:") : NULL;
        size_t len = msg ? (size_t)(end ? end - msg : (ptrdiff_t)strlen(msg)) : 0, tail = strlen("interrupted!");
        if (!msg || (len >= tail && !strncmp(msg + len - tail, "interrupted!", tail) &&
                     (len == tail || !strncmp(msg + len - tail - 2, ": ", 2))))
            fputs("workbench: interrupted (Ctrl-C)\n", stderr);
        else
            fprintf(stderr, "workbench: %.*s\n", (int)len, msg);
        fflush(stderr);
        lua_pop(L, 1);
    } else if (status != LUA_OK) {
        fprintf(stderr, "workbench: %s\n", lua_tostring(L, -1));
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}

#ifdef WB_HAVE_READLINE
/* Ctrl-C at the prompt: abandon the line (and any unfinished multi-line chunk), keep going. */
static void on_sigint_prompt(int sig) {
    (void)sig;
    interrupted_at_prompt = 1;
    fputs("^C\n", stdout);
    rl_set_prompt("> "); /* a continuation line's chunk is dropped: back to the first prompt */
    rl_on_new_line();
    rl_replace_line("", 0);
    rl_redisplay();
}

/* ---- completion ------------------------------------------------------------------------ */

#define MAX_MATCHES 512
static char *matches[MAX_MATCHES];
static int nmatches, match_index;

static void add_match(const char *prefix, const char *key) {
    if (nmatches >= MAX_MATCHES) return;
    for (int i = 0; i < nmatches; i++)
        if (!strcmp(matches[i] + strlen(prefix), key)) return;
    size_t n = strlen(prefix) + strlen(key) + 1;
    char *m = malloc(n);
    if (!m) return;
    snprintf(m, n, "%s%s", prefix, key);
    matches[nmatches++] = m;
}

/* Pushes field `name` of the table at the top of the stack without metamethods (a metatable's own
 * __index ran before: an erroring one panicked the REPL, a looping one hung it); its type. */
static int raw_field(lua_State *L, const char *name) {
    lua_pushstring(L, name);
    return lua_rawget(L, -2);
}

/* Keys of the table at the top of the stack starting with `part` (functions only when
 * `methods`); follows __index tables of metatables (and __methods, which tensors expose), with
 * raw lookups only: completion runs no code. */
static void collect(lua_State *L, const char *prefix, const char *part, int methods, int depth) {
    if (depth > 3) return;
    size_t plen = strlen(part);
    if (lua_type(L, -1) == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) == LUA_TSTRING) {
                const char *k = lua_tostring(L, -2);
                if (!strncmp(k, part, plen) && (!methods || lua_isfunction(L, -1)) && k[0] != '_') add_match(prefix, k);
            }
            lua_pop(L, 1);
        }
    }
    if (lua_getmetatable(L, -1)) {
        if (raw_field(L, "__methods") == LUA_TTABLE) collect(L, prefix, part, methods, depth + 1);
        lua_pop(L, 1);
        if (raw_field(L, "__index") == LUA_TTABLE) collect(L, prefix, part, methods, depth + 1);
        lua_pop(L, 1);
        /* fields an __index function answers (a tensor's shape, dtype, device), listed by name */
        if (!methods && raw_field(L, "__fields") == LUA_TTABLE) {
            for (lua_Integer i = 1; lua_rawgeti(L, -1, i) == LUA_TSTRING; i++) {
                if (!strncmp(lua_tostring(L, -1), part, plen)) add_match(prefix, lua_tostring(L, -1));
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        lua_pop(L, 1);
    }
}

/* Is the value at `idx` the wb library table (whose missing fields load scripts/wb/<name>.lua)? */
static int is_wb_library(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    raw_field(L, "wb");
    int same = lua_type(L, idx) == LUA_TTABLE && lua_rawequal(L, idx, -1);
    lua_pop(L, 2);
    return same;
}

/* The library's modules not loaded yet: scripts/wb/<name>.lua (wb.prof<Tab> -> wb.profiler). */
static void collect_modules(lua_State *L, const char *prefix, const char *part) {
    int top = lua_gettop(L);
    /* (the library's package table, as loaded: a script may have replaced the global one with
     * one whose metamethods error or loop) */
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (raw_field(L, "package") == LUA_TTABLE && raw_field(L, "wb_scripts_dir") == LUA_TSTRING) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/wb", lua_tostring(L, -1));
        DIR *d = opendir(dir);
        struct dirent *entry;
        size_t plen = strlen(part);
        while (d && (entry = readdir(d))) {
            size_t n = strlen(entry->d_name);
            if (n > 4 && !strcmp(entry->d_name + n - 4, ".lua") && !strncmp(entry->d_name, part, plen) &&
                entry->d_name[0] != '_' && n - 4 < 64) {
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)(n - 4), entry->d_name);
                add_match(prefix, name);
            }
        }
        if (d) closedir(d);
    }
    lua_settop(L, top);
}

static int load_field(lua_State *L) {
    lua_gettable(L, 1);
    return 1;
}

/* Resolves "a.b.c" from the globals with raw lookups only (completion must not run code). */
static int resolve(lua_State *L, const char *path, size_t len) {
    lua_pushglobaltable(L);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && path[i] != '.' && path[i] != ':') continue;
        if (i == start) return 0;
        lua_pushlstring(L, path + start, i - start);
        int t = lua_type(L, -2);
        if (t == LUA_TTABLE) {
            lua_pushvalue(L, -1);
            if (lua_rawget(L, -3) == LUA_TNIL && is_wb_library(L, -3)) {
                /* wb.nn.L<Tab>: load the module as wb.nn would (the library's own code only) */
                lua_pop(L, 1);
                lua_pushcfunction(L, load_field);
                lua_pushvalue(L, -3);
                lua_pushvalue(L, -3);
                if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
                    lua_pop(L, 1);
                    lua_pushnil(L);
                }
            }
            lua_remove(L, -2); /* the key */
        } else {
            lua_pop(L, 1);
            return 0;
        }
        lua_remove(L, -2);
        if (lua_isnil(L, -1)) return 0;
        start = i + 1;
    }
    return 1;
}

static char *generator(const char *text, int state) {
    (void)text;
    if (state == 0) match_index = 0;
    return match_index < nmatches ? strdup(matches[match_index++]) : NULL;
}

static char **complete(const char *text, int start, int end) {
    (void)start, (void)end;
    lua_State *L = repl_state;
    for (int i = 0; i < nmatches; i++)
        free(matches[i]);
    nmatches = 0;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    int top = lua_gettop(L);
    const char *sep = strpbrk(text, ".:") ? text + strlen(text) : NULL;
    for (const char *p = text + strlen(text); p > text; p--)
        if (p[-1] == '.' || p[-1] == ':') {
            sep = p - 1;
            break;
        }
    if (!sep) {
        lua_pushglobaltable(L);
        collect(L, "", text, 0, 0);
        static const char *const keywords[] = {"and",      "break",  "do",   "else", "elseif", "end",   "false", "for",
                                               "function", "goto",   "if",   "in",   "local",  "nil",   "not",   "or",
                                               "repeat",   "return", "then", "true", "until",  "while", NULL};
        for (const char *const *k = keywords; *k; k++)
            if (!strncmp(*k, text, strlen(text))) add_match("", *k);
    } else if (resolve(L, text, (size_t)(sep - text))) {
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(sep - text + 1), text);
        collect(L, prefix, sep + 1, *sep == ':', 0);
        if (*sep == '.' && is_wb_library(L, -1)) collect_modules(L, prefix, sep + 1);
    }
    lua_settop(L, top);
    if (nmatches == 0) return NULL;
    rl_completion_append_character = '\0';
    return rl_completion_matches(text, generator);
}

static char history_path[1024];
#endif

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

#define PRETTY "wb.repl.pretty"

static void print_results(lua_State *L, int base) {
    int n = lua_gettop(L) - base;
    if (n == 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = NULL;
        /* tables print as values (wb.pretty), everything else as tostring does */
        if (lua_type(L, base + i) == LUA_TTABLE && lua_getfield(L, LUA_REGISTRYINDEX, PRETTY) == LUA_TFUNCTION) {
            lua_pushvalue(L, base + i);
            if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
                s = lua_tolstring(L, -1, &len);
            else
                lua_pop(L, 1);
        } else if (lua_type(L, base + i) == LUA_TTABLE) {
            lua_pop(L, 1);
        }
        if (!s) s = luaL_tolstring(L, base + i, &len);
        if (i > 1) fputc('\t', stdout);
        fwrite(s, 1, len, stdout);
        lua_pop(L, 1);
    }
    fputc('\n', stdout);
    fflush(stdout);
    lua_settop(L, base);
}

static double now_s(void) { return (double)wb_now_ns() * 1e-9; }

/* A chunk whose last non-blank character is ';' asks for silence. */
static int silenced(const char *chunk) {
    size_t n = strlen(chunk);
    while (n > 0 && (chunk[n - 1] == ' ' || chunk[n - 1] == '\t' || chunk[n - 1] == '\n'))
        n--;
    return n > 0 && chunk[n - 1] == ';';
}

void wb_repl_run(lua_State *L) {
    int tty = isatty(STDIN_FILENO);
    repl_state = L;
    /* help() and friends, for the REPL only (scripts/wb/help.lua) */
    lua_getglobal(L, "require");
    lua_pushstring(L, "wb.help");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
        lua_setglobal(L, "help");
    else
        lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushstring(L, "wb.pretty");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
        lua_setfield(L, LUA_REGISTRYINDEX, PRETTY);
    else
        lua_pop(L, 1);
    lua_pushcfunction(L, l_traceback);
    lua_setglobal(L, "traceback");
#ifdef WB_HAVE_READLINE
    if (tty) {
        rl_readline_name = "workbench";
        rl_attempted_completion_function = complete;
        rl_basic_word_break_characters = " \t\n\"'><=;|&{(,+-*/%^#~[]";
        rl_catch_signals = 0;
        const char *home = getenv("HOME");
        if (home &&
            snprintf(history_path, sizeof history_path, "%s/.workbench_history", home) < (int)sizeof history_path &&
            read_history(history_path) != 0)
            write_history(history_path); /* create it: append_history needs an existing file */
    }
#endif
    if (tty)
        printf("workbench %s REPL: values print (a trailing ; silences), help() for help, traceback() after an "
               "error, Ctrl-D leaves.\n",
               LUA_RELEASE);
    char *line;
    char *chunk = NULL;
    size_t chunk_len = 0;
    for (;;) {
#ifdef WB_HAVE_READLINE
        void (*previous)(int) = tty ? signal(SIGINT, on_sigint_prompt) : SIG_DFL;
#endif
        interrupted_at_prompt = 0;
        line = read_line(chunk ? ">> " : "> ", tty);
#ifdef WB_HAVE_READLINE
        if (tty) signal(SIGINT, previous);
#endif
        if (!line) break;
        if (interrupted_at_prompt) { /* Ctrl-C dropped what was being typed */
            free(chunk);
            chunk = NULL;
            chunk_len = 0;
            if (!*line) {
                free(line);
                continue;
            }
        }
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
        const char *ret = lua_pushfstring(L, "return %s", chunk);
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
        if (tty && chunk_len) {
            add_history(chunk);
            if (history_path[0]) append_history(1, history_path);
        }
#endif
        int quiet = silenced(chunk);
        free(chunk);
        chunk = NULL;
        chunk_len = 0;
        if (status != LUA_OK) {
            fprintf(stderr, "%s\n", lua_tostring(L, -1));
            lua_settop(L, base);
            continue;
        }
        double t0 = now_s();
        int run = docall_with(L, 0, LUA_MULTRET, repl_message);
        if (run == LUA_OK) {
            if (!quiet) print_results(L, base);
        } else if (run == LUA_ERRMEM) {
            report_memory_error();
            fflush(stderr);
        } else {
            fprintf(stderr, "%s\n", lua_tostring(L, -1));
            fflush(stderr);
        }
        double dt = now_s() - t0;
        if (dt >= 0.1) printf(dt >= 1 ? "(%.2f s)\n" : "(%.0f ms)\n", dt >= 1 ? dt : dt * 1e3);
        fflush(stdout);
        lua_settop(L, base);
    }
    free(chunk);
#ifdef WB_HAVE_READLINE
    if (tty && history_path[0]) history_truncate_file(history_path, 1000);
#endif
    if (tty) fputc('\n', stdout);
}

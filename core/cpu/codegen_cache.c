/* codegen_cache.c: compiling generated kernels with the system C compiler and caching the shared
 * objects on disk (see codegen.h). Entries are named by a 64-bit hash of the compile command and
 * the source: <hash>.c (the source, kept for reading and for messages), <hash>.so and
 * <hash>.rec, its record (codegen_store.c: the folder must be this user's with mode 0700, files
 * are created new and renamed into place). An object is loaded only when its record names its
 * source, command and bytes; one that does not match or load (truncated, corrupt, planted) is
 * rebuilt. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wb_kernels/gemm.h>

#include "backend.h"
#include "codegen.h"
#include "codegen_store.h"
#include "wb_codegen_args.h"
#include "wb_codegen_avx2.h"
#include "wb_codegen_avx512.h"
#include "wb_codegen_head.h"
#include "wb_codegen_math.h"
#include "wb_codegen_scalar.h"

extern char **environ;

static long compiles, hits, device_compiles, device_hits;

/* head + the active path's vector helpers + the math, joined once per path */
const char *wb_codegen_prelude(void) {
    static char *joined[3];
    const char *isa = wb_cpu_isa_active()->name;
    int i = !strcmp(isa, "avx512") ? 2 : !strcmp(isa, "avx2") ? 1 : 0;
    if (!joined[i]) {
        const char *vf = i == 2 ? wb_codegen_avx512_text : i == 1 ? wb_codegen_avx2_text : wb_codegen_scalar_text;
        size_t n = strlen(wb_codegen_head_text) + strlen(wb_codegen_args_text) + strlen(vf) + strlen(wb_codegen_math_text) + 1;
        if (!(joined[i] = malloc(n))) return NULL;
        snprintf(joined[i], n, "%s%s%s%s", wb_codegen_head_text, wb_codegen_args_text, vf, wb_codegen_math_text);
    }
    return joined[i];
}

void wb_codegen_counts(long *c, long *h) { *c = compiles, *h = hits; }
void wb_codegen_device_counts(long *c, long *h) { *c = device_compiles, *h = device_hits; }

/* The flags: optimised, position-independent, threads by OpenMP (the runtime the hand-written
 * kernels use), IEEE semantics kept (no -ffast-math; fp-contract off as for vecmath.inc);
 * -fno-trapping-math lets the selects of the math be if-converted so the loops vectorise (it
 * changes no value). The vector ISA is the active CPU path's. */
static const char *isa_flags(void) {
    const char *isa = wb_cpu_isa_active()->name;
    if (!strcmp(isa, "avx512")) return "-mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mprefer-vector-width=512";
    if (!strcmp(isa, "avx2")) return "-mavx2 -mfma";
    return "";
}

static const char *compiler(void) {
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

static const char *const base_flags =
    "-O3 -fPIC -shared -fopenmp -ffp-contract=off -fno-math-errno -fno-trapping-math -w";

static int command_cut; /* $CC and the flags did not fit: refused by wb_codegen_build, never cut */

const char *wb_codegen_command(void) {
    static char buf[2048];
    command_cut = snprintf(buf, sizeof buf, "%s %s %s", compiler(), base_flags, isa_flags()) >= (int)sizeof buf;
    return buf;
}

/* No shared default (a folder under /tmp could be made first by another user): without the
 * variables, the user's home folder from the password database; without that, none. */
static const char *dir_too_long; /* the variable whose folder did not fit: refused, never cut */

const char *wb_codegen_cache_dir(void) {
    static char dir[400];
    const char *env = getenv("WB_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (!(home && *home)) {
        struct passwd *pw = getpwuid(geteuid());
        home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
    int n;
    if (env && *env)
        n = snprintf(dir, sizeof dir, "%s", env), dir_too_long = "WB_CACHE_DIR";
    else if (xdg && *xdg)
        n = snprintf(dir, sizeof dir, "%s/workbench", xdg), dir_too_long = "XDG_CACHE_HOME";
    else if (home)
        n = snprintf(dir, sizeof dir, "%s/.cache/workbench", home), dir_too_long = "HOME";
    else
        return dir_too_long = NULL, NULL;
    if (n >= (int)sizeof dir) return NULL;
    dir_too_long = NULL;
    return dir;
}

static wb_status no_cache_dir(void) {
    if (dir_too_long)
        return wb_error(WB_ERR_UNSUPPORTED, "codegen: the cache folder from %s is longer than %d bytes: set "
                        "WB_CACHE_DIR to a shorter one", dir_too_long, 399);
    return wb_error(WB_ERR_UNSUPPORTED, "codegen: no cache folder: WB_CACHE_DIR, XDG_CACHE_HOME and HOME are unset "
                                        "and this user has no home folder (set WB_CACHE_DIR)");
}

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (const unsigned char *u = (const unsigned char *)s; *u; u++)
        h = (h ^ *u) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;
}

static int load(const char *so, const char *symbol, wb_codegen_kernel *k) {
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    void *fn = dlsym(h, symbol);
    if (!fn) {
        dlclose(h);
        return -1;
    }
    k->fn = (void (*)(const wb_poi_args *))fn;
    return 0;
}

/* Loads dir/so only when dir/rec is the record of its bytes, made from this source and command. */
static int load_verified(int dirfd, const char *dir, const char *so, const char *rec, const char *command,
                         uint64_t source_hash, const char *symbol, wb_codegen_kernel *k) {
    char *bytes, path[600];
    size_t n;
    if (wb_store_read(dirfd, so, &bytes, &n, NULL)) return -1;
    int ok = wb_store_record_matches(dirfd, rec, command, source_hash, bytes, n);
    free(bytes);
    wb_store_path(dirfd, dir, so, path, sizeof path);
    return ok && load(path, symbol, k) == 0 ? 0 : -1;
}

/* Takes a new name in the folder for a file another program writes (O_EXCL: no planted link). */
static int claim(int dirfd, const char *name) {
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) { /* left by a killed process that had this pid */
        unlinkat(dirfd, name, 0);
        fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    return fd < 0 ? -1 : close(fd);
}

/* The first line of the compiler's output that says "error" (else its first line). */
static void first_error(const char *path, char *out, size_t len) {
    FILE *f = fopen(path, "r");
    char line[512];
    out[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!out[0]) snprintf(out, len, "%s", line);
        if (strstr(line, "error")) {
            snprintf(out, len, "%s", line);
            break;
        }
    }
    fclose(f);
}

/* Runs the compile command with its output into err_path; returns the exit status, or -1 when
 * it could not be started (errno says why). */
static int run_compiler(const char *src, const char *obj, const char *err_path) {
    /* the command ($CC and its flags) split at spaces; the two paths words of their own (a cache
     * folder may have a space in its name); more words than argv holds are refused, not cut */
    char cmd[2048], *argv[64];
    const char *command = wb_codegen_command();
    int argc = 0;
    snprintf(cmd, sizeof cmd, "%s", command); /* (it fits: wb_codegen_build refused a longer one) */
    for (char *tok = strtok(cmd, " "); tok; tok = strtok(NULL, " ")) {
        if (argc == 60) return errno = E2BIG, -1;
        argv[argc++] = tok;
    }
    if (argc == 0) return errno = ENOENT, -1;
    argv[argc++] = "-o", argv[argc++] = (char *)obj, argv[argc++] = (char *)src, argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, err_path, O_WRONLY | O_TRUNC | O_NOFOLLOW, 0600); /* claimed */
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        errno = rc;
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* k->kind: wb_<op> carrying its ops */
static wb_status intern_kind(const char *symbol, const char *ops, wb_codegen_kernel *k) {
    if (strncmp(symbol, "wb_", 3)) return wb_error(WB_ERR_ARGUMENT, "codegen: symbol '%s' must start with wb_", symbol);
    /* kinds live for the process and keep their strings: these copies are never freed */
    char *op = strdup(symbol + 3), *ops_copy = strdup(ops ? ops : "");
    if (!op || !ops_copy) {
        free(op), free(ops_copy);
        return wb_error(WB_ERR_MEMORY, "codegen: out of memory");
    }
    k->kind = wb_kernel_kind_intern(&(wb_kernel_kind){.op = op, .ops = ops_copy});
    if (k->kind->op != op) free(op), free(ops_copy); /* the kind existed: it keeps its own copies */
    return WB_OK;
}

wb_status wb_codegen_build(const char *symbol, const char *ops, const char *source, wb_codegen_kernel *k) {
    wb_status st = intern_kind(symbol, ops, k);
    if (st) return st;
    const char *dir = wb_codegen_cache_dir(), *command = wb_codegen_command();
    if (!dir) return no_cache_dir();
    if (command_cut)
        return wb_error(WB_ERR_UNSUPPORTED, "codegen: CC and the flags are longer than 2047 bytes: '%.60s...'", command);
    uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, command), source);
    uint64_t source_hash = wb_store_hash(0xcbf29ce484222325ull, source, strlen(source));
    char so[64], rec[64], src[64], tmp[96], err[96], path[600], tmp_path[640], err_path[640];
    snprintf(so, sizeof so, "%016llx.so", (unsigned long long)h);
    snprintf(rec, sizeof rec, "%016llx.rec", (unsigned long long)h);
    snprintf(src, sizeof src, "%016llx.c", (unsigned long long)h);
    snprintf(k->source_path, sizeof k->source_path, "%s/%s", dir, src);
    int dirfd = wb_store_open(dir);
    if (dirfd < 0) return WB_ERR_UNSUPPORTED;
    if (load_verified(dirfd, dir, so, rec, command, source_hash, symbol, k) == 0) {
        close(dirfd);
        hits++;
        k->compiled = 0;
        return WB_OK;
    }
    /* missing, corrupt, foreign or planted: rebuilt (the rename below replaces it) */
    st = WB_OK;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", so, (long)getpid());
    snprintf(err, sizeof err, "%s.%ld.log", so, (long)getpid());
    snprintf(tmp_path, sizeof tmp_path, "%s/%s", dir, tmp);
    snprintf(err_path, sizeof err_path, "%s/%s", dir, err);
    if (wb_store_write(dirfd, src, source, strlen(source)) || claim(dirfd, tmp) || claim(dirfd, err)) {
        st = wb_error(WB_ERR_DEVICE, "codegen: cannot write into the cache folder %s: %s", dir, strerror(errno));
        unlinkat(dirfd, tmp, 0);
        close(dirfd);
        return st;
    }
    int rc = run_compiler(k->source_path, tmp_path, err_path);
    compiles++;
    char *bytes = NULL, record[1024];
    size_t n = 0;
    if (rc == -1 && errno == E2BIG) {
        st = wb_error(WB_ERR_UNSUPPORTED, "codegen: the compiler's command has more than 60 words: '%.60s...'", command);
    } else if (rc == -1 || rc == 127) {
        int e = errno;
        st = wb_error(WB_ERR_UNSUPPORTED, "no C compiler: '%s' could not be run (%s); set CC to one", compiler(),
                      rc == 127 ? "not found" : strerror(e));
    } else if (rc != 0) {
        char line[512];
        first_error(err_path, line, sizeof line);
        st = wb_error(WB_ERR_ARGUMENT, "codegen: the C compiler failed on %s: %s", k->source_path, line);
    } else if (wb_store_read(dirfd, tmp, &bytes, &n, NULL)) {
        st = wb_error(WB_ERR_DEVICE, "codegen: cannot read back %s: %s", tmp_path, strerror(errno));
    } else {
        wb_store_record(record, sizeof record, command, source_hash, bytes, n);
        free(bytes);
        if (wb_store_write(dirfd, rec, record, strlen(record)) || renameat(dirfd, tmp, dirfd, so))
            st = wb_error(WB_ERR_DEVICE, "codegen: cannot move %s into the cache: %s", tmp_path, strerror(errno));
    }
    unlinkat(dirfd, err, 0);
    unlinkat(dirfd, tmp, 0); /* gone after the rename */
    if (!st) {
        wb_store_path(dirfd, dir, so, path, sizeof path);
        if (load(path, symbol, k))
            st = wb_error(WB_ERR_DEVICE, "codegen: %s/%s was compiled but does not load: %s", dir, so, dlerror());
    }
    close(dirfd);
    if (st) return st;
    k->compiled = 1;
    return WB_OK;
}

/* ---- devices with a compiler of their own ------------------------------------------------------- */

const char *wb_codegen_device_compiler(wb_device device) {
    const wb_backend *be = wb_backend_get(device);
    const wb_codegen_target *t;
    if (!be->codegen_target) {
        wb_error(WB_ERR_UNSUPPORTED, "device %s has no code generator", be->name);
        return NULL;
    }
    return be->codegen_target(&t) ? NULL : t->compiler;
}

/* The first line of a compiler's log that says "error" (else its first line). */
static void first_error_in(const char *log, char *out, size_t len) {
    out[0] = 0;
    for (const char *p = log; *p;) {
        size_t n = strcspn(p, "\n");
        if (n && !out[0]) snprintf(out, len, "%.*s", (int)n, p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        if (strstr(line, "error")) {
            snprintf(out, len, "%s", line);
            return;
        }
        p += n + (p[n] == '\n');
    }
}

wb_status wb_codegen_build_device(wb_device device, const char *symbol, const char *ops, const char *device_source,
                                  const char *host_source, wb_codegen_kernel *k) {
    const wb_backend *be = wb_backend_get(device);
    if (!be->codegen_target) return wb_error(WB_ERR_UNSUPPORTED, "device %s has no code generator", be->name);
    const wb_codegen_target *t;
    wb_status st = be->check();
    if (st || (st = be->codegen_target(&t))) return st;
    k->device = device;
    if (t->host_kernels) { /* the host build first: it names the kind too */
        if (!host_source)
            return wb_error(WB_ERR_ARGUMENT, "codegen: device %s runs host kernels: no host source given", be->name);
        if ((st = wb_codegen_build(symbol, ops, host_source, k))) return st;
    } else if ((st = intern_kind(symbol, ops, k))) {
        return st;
    }
    const char *dir = wb_codegen_cache_dir();
    if (!dir) return no_cache_dir();
    uint64_t h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ull, be->name), t->compiler), device_source);
    uint64_t source_hash = wb_store_hash(0xcbf29ce484222325ull, device_source, strlen(device_source));
    char img[64], rec[64], src[64];
    snprintf(img, sizeof img, "%016llx.cubin", (unsigned long long)h);
    snprintf(rec, sizeof rec, "%016llx.cubin.rec", (unsigned long long)h);
    snprintf(src, sizeof src, "%016llx.cu", (unsigned long long)h);
    snprintf(k->source_path, sizeof k->source_path, "%s/%s", dir, src);
    int dirfd = wb_store_open(dir);
    if (dirfd < 0) return WB_ERR_UNSUPPORTED;
    char *data = NULL;
    size_t size = 0;
    if (wb_store_read(dirfd, img, &data, &size, NULL) == 0) {
        st = wb_store_record_matches(dirfd, rec, t->compiler, source_hash, data, size)
                 ? be->codegen_load(data, size, symbol, (void (*)(const void *))(void (*)(void))k->fn, &k->device_kernel)
                 : WB_ERR_DEVICE;
        free(data);
        if (!st) {
            close(dirfd);
            device_hits++;
            k->compiled = 0;
            return WB_OK;
        }
    } /* missing, corrupt, foreign or planted: rebuilt (the rename below replaces it) */
    if (wb_store_write(dirfd, src, device_source, strlen(device_source))) {
        st = wb_error(WB_ERR_DEVICE, "codegen: cannot write %s: %s", k->source_path, strerror(errno));
        close(dirfd);
        return st;
    }
    char log[4096] = "";
    void *image = NULL;
    device_compiles++;
    if ((st = be->codegen_compile(device_source, symbol, &image, &size, log, sizeof log))) {
        char line[512];
        first_error_in(log, line, sizeof line);
        close(dirfd);
        return wb_error(WB_ERR_ARGUMENT, "codegen: %s failed on %s: %s", t->name, k->source_path,
                        line[0] ? line : wb_error_message());
    }
    char record[1024];
    wb_store_record(record, sizeof record, t->compiler, source_hash, image, size);
    if (wb_store_write(dirfd, img, image, size) || wb_store_write(dirfd, rec, record, strlen(record))) {
        int e = errno;
        close(dirfd);
        be->codegen_image_free(image);
        return wb_error(WB_ERR_DEVICE, "codegen: cannot write %s/%s into the cache: %s", dir, img, strerror(e));
    }
    close(dirfd);
    st = be->codegen_load(image, size, symbol, (void (*)(const void *))(void (*)(void))k->fn, &k->device_kernel);
    be->codegen_image_free(image);
    if (st) return st;
    k->compiled = 1;
    return WB_OK;
}

/* codegen_cache.c: compiling generated kernels with the system C compiler and caching the shared
 * objects on disk (see codegen.h). Entries are named by a 64-bit hash of the compile command and
 * the source: <hash>.c (the source, kept for reading and for messages) and <hash>.so. A new
 * object is compiled to a temporary name and renamed into place, so a concurrent process never
 * loads a half-written file; an entry that does not load (truncated, corrupt) is rebuilt. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
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

const char *wb_codegen_command(void) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s %s %s", compiler(), base_flags, isa_flags());
    return buf;
}

const char *wb_codegen_cache_dir(void) {
    static char dir[400];
    const char *env = getenv("WB_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env)
        snprintf(dir, sizeof dir, "%s", env);
    else if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/workbench", xdg);
    else
        snprintf(dir, sizeof dir, "%s/.cache/workbench", home && *home ? home : "/tmp");
    return dir;
}

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (const unsigned char *u = (const unsigned char *)s; *u; u++)
        h = (h ^ *u) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0700) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
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
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s -o %s %s", wb_codegen_command(), obj, src);
    char *argv[64];
    int argc = 0;
    for (char *tok = strtok(cmd, " "); tok && argc < 63; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
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
    const char *dir = wb_codegen_cache_dir();
    uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull, wb_codegen_command()), source);
    char so[600], src[600], tmp[640], err[640];
    snprintf(so, sizeof so, "%s/%016llx.so", dir, (unsigned long long)h);
    snprintf(src, sizeof src, "%s/%016llx.c", dir, (unsigned long long)h);
    snprintf(k->source_path, sizeof k->source_path, "%s", src);
    if (access(so, R_OK) == 0) {
        if (load(so, symbol, k) == 0) {
            hits++;
            k->compiled = 0;
            return WB_OK;
        }
        unlink(so); /* corrupt or foreign: rebuild it */
    }
    if (make_dirs(dir))
        return wb_error(WB_ERR_DEVICE, "codegen: cannot create the cache folder %s: %s", dir, strerror(errno));
    FILE *f = fopen(src, "w");
    if (!f || fputs(source, f) < 0 || fclose(f)) {
        if (f) fclose(f);
        return wb_error(WB_ERR_DEVICE, "codegen: cannot write %s: %s", src, strerror(errno));
    }
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", so, (long)getpid());
    snprintf(err, sizeof err, "%s.%ld.log", so, (long)getpid());
    int rc = run_compiler(src, tmp, err);
    compiles++;
    if (rc == -1 || rc == 127) {
        int e = errno;
        unlink(err);
        return wb_error(WB_ERR_UNSUPPORTED, "no C compiler: '%s' could not be run (%s); set CC to one",
                        compiler(), rc == 127 ? "not found" : strerror(e));
    }
    if (rc != 0) {
        char line[512];
        first_error(err, line, sizeof line);
        unlink(tmp);
        return wb_error(WB_ERR_ARGUMENT, "codegen: the C compiler failed on %s: %s", src, line);
    }
    unlink(err);
    if (rename(tmp, so)) return wb_error(WB_ERR_DEVICE, "codegen: cannot move %s into the cache: %s", tmp, strerror(errno));
    if (load(so, symbol, k))
        return wb_error(WB_ERR_DEVICE, "codegen: %s was compiled but does not load: %s", so, dlerror());
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

static int read_file(const char *path, char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int ok = fseek(f, 0, SEEK_END) == 0;
    long n = ok ? ftell(f) : -1;
    char *buf = n > 0 ? malloc((size_t)n) : NULL;
    ok = buf && fseek(f, 0, SEEK_SET) == 0 && fread(buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!ok) {
        free(buf);
        return -1;
    }
    *data = buf, *size = (size_t)n;
    return 0;
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
    uint64_t h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ull, be->name), t->compiler), device_source);
    char img[600], src[600], tmp[640];
    snprintf(img, sizeof img, "%s/%016llx.cubin", dir, (unsigned long long)h);
    snprintf(src, sizeof src, "%s/%016llx.cu", dir, (unsigned long long)h);
    snprintf(k->source_path, sizeof k->source_path, "%s", src);
    char *data = NULL;
    size_t size = 0;
    if (read_file(img, &data, &size) == 0) {
        st = be->codegen_load(data, size, symbol, (void (*)(const void *))(void (*)(void))k->fn, &k->device_kernel);
        free(data);
        if (!st) {
            device_hits++;
            k->compiled = 0;
            return WB_OK;
        }
        unlink(img); /* corrupt or foreign: rebuild it */
    }
    if (make_dirs(dir))
        return wb_error(WB_ERR_DEVICE, "codegen: cannot create the cache folder %s: %s", dir, strerror(errno));
    FILE *f = fopen(src, "w");
    if (!f || fputs(device_source, f) < 0 || fclose(f)) {
        if (f) fclose(f);
        return wb_error(WB_ERR_DEVICE, "codegen: cannot write %s: %s", src, strerror(errno));
    }
    char log[4096] = "";
    void *image = NULL;
    device_compiles++;
    if ((st = be->codegen_compile(device_source, symbol, &image, &size, log, sizeof log))) {
        char line[512];
        first_error_in(log, line, sizeof line);
        return wb_error(WB_ERR_ARGUMENT, "codegen: %s failed on %s: %s", t->name, src,
                        line[0] ? line : wb_error_message());
    }
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", img, (long)getpid());
    f = fopen(tmp, "wb");
    int written = f && fwrite(image, 1, size, f) == size;
    if (f && fclose(f)) written = 0;
    if (!written || rename(tmp, img)) {
        int e = errno;
        unlink(tmp);
        be->codegen_image_free(image);
        return wb_error(WB_ERR_DEVICE, "codegen: cannot write %s into the cache: %s", img, strerror(e));
    }
    st = be->codegen_load(image, size, symbol, (void (*)(const void *))(void (*)(void))k->fn, &k->device_kernel);
    be->codegen_image_free(image);
    if (st) return st;
    k->compiled = 1;
    return WB_OK;
}

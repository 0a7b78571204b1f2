/* mock_codegen.c: the mock plugin's stand-in for NVRTC and the driver's module loader (see
 * mock_plugin.c): an "image" is the source behind a header, a load takes the host build of the
 * same kernel that the core hands over, and a launch runs it on the stream like every kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_internal.h"

static const char image_magic[] = "wb mock image\n";

int mock_codegen_init(wb_cuda_codegen_info *out) {
    memset(out, 0, sizeof *out);
    if (getenv("WB_MOCK_NO_NVRTC"))
        return mock_fail(
            "NVRTC is not available: libnvrtc.so.13: cannot open shared object file (mock: WB_MOCK_NO_NVRTC)");
    snprintf(out->compiler, sizeof out->compiler, "mock NVRTC (host kernels)");
    snprintf(out->arch, sizeof out->arch, "sm_90");
    out->host_kernels = 1;
    return 0;
}

int mock_codegen_compile(const char *source, const char *name, const char *options, void **image, size_t *size,
                         char *log, size_t loglen) {
    (void)options;
    *image = NULL;
    *size = 0;
    if (loglen) log[0] = 0;
    char decl[192];
    snprintf(decl, sizeof decl, "extern \"C\" __global__ void %s(", name);
    if (getenv("WB_MOCK_NVRTC_FAIL") || !strstr(source, decl)) {
        snprintf(log, loglen, "%s(1): error: %s\n1 error detected in the compilation of \"%s.cu\".\n", name,
                 getenv("WB_MOCK_NVRTC_FAIL")
                     ? "identifier \"wb_mock_undefined\" is undefined (mock: WB_MOCK_NVRTC_FAIL)"
                     : "the kernel is not declared extern \"C\" __global__",
                 name);
        return mock_fail("nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION (6)");
    }
    size_t n = strlen(image_magic) + strlen(name) + 1 + strlen(source);
    char *img = malloc(n + 1);
    if (!img) return mock_fail("mock: out of memory for an image");
    snprintf(img, n + 1, "%s%s\n%s", image_magic, name, source);
    *image = img;
    *size = n;
    return 0;
}

void mock_codegen_image_free(void *image) { free(image); }

/* cuModuleLoadData + cuModuleGetFunction: the image must be the mock's and name its kernel. */
int mock_codegen_load(const void *image, size_t size, const char *name, void (*host_fn)(const void *), void **kernel) {
    *kernel = NULL;
    size_t m = strlen(image_magic), n = strlen(name);
    const char *img = image;
    if (size < m + n + 1 || memcmp(img, image_magic, m))
        return mock_fail("cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200)");
    if (memcmp(img + m, name, n) || img[m + n] != '\n')
        return mock_fail("cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (500): no kernel %s in the image", name);
    if (!host_fn) return mock_fail("mock: a generated kernel needs its host build (codegen_info.host_kernels)");
    gen_kernel *k = wbcu_loaded_find(image, size, name); /* the same image: the same module */
    if (k && k->host_fn == host_fn) {
        *kernel = k;
        return 0;
    }
    if (!(k = calloc(1, sizeof *k))) return mock_fail("mock: out of memory loading a kernel");
    snprintf(k->name, sizeof k->name, "%s", name);
    k->host_fn = host_fn;
    if (wbcu_loaded_add(image, size, name, k)) {
        free(k);
        return mock_fail("mock: out of memory loading a kernel");
    }
    *kernel = k; /* modules stay loaded (and listed) for the process's life */
    return 0;
}

int mock_codegen_launch(void *kernel, const wb_cuda_poi_args *args) {
    op o = {.kind = OP_GEN, .u.p = {.k = kernel, .a = *args}};
    return mock_launch(&o, "cuLaunchKernel");
}

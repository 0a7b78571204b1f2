/* prepack.c: weights packed once and reused (what makes small-M linears fast: packing a
 * 768x3072 weight costs as much as multiplying one token by it). An entry is keyed by the
 * storage's process-unique id and write version, the view geometry and the ISA, so any write
 * to the weight (copy_, fill_, a kernel output) invalidates it; freeing the storage drops it. The
 * packed layout follows the blocking's K blocks, so a forced blocking (tests) packs again. */
#include <stdlib.h>
#include <string.h>

#include <wb_kernels/gemm.h>
#include "convert.h"
#include "linear.h"
#include "storage.h"

#define CACHE_ENTRIES 64
#define CACHE_BYTES   ((size_t)1 << 30)

typedef struct entry {
    const wb_cpu_isa *isa;
    uint64_t id, version, up_id, up_version;
    int64_t offset, up_offset, k, n, rsb, csb;
    int bf16;
    int64_t kc; /* the blocking's kc, and whether it was forced, when packed */
    int forced;
    float *data;
    size_t bytes;
    uint64_t last_use;
} entry;

static entry cache[CACHE_ENTRIES];
static size_t cache_bytes;
static int cache_entries;
static uint64_t clock_ticks;

static void drop(entry *e) {
    free(e->data);
    cache_bytes -= e->bytes;
    cache_entries--;
    memset(e, 0, sizeof *e);
}

void wb_prepack_forget(uint64_t storage_id) {
    if (cache_entries == 0) return; /* every storage free comes here */
    for (int i = 0; i < CACHE_ENTRIES; i++)
        if (cache[i].data && (cache[i].id == storage_id || cache[i].up_id == storage_id)) drop(&cache[i]);
}

size_t wb_prepack_bytes(int *entries) {
    int n = 0;
    for (int i = 0; i < CACHE_ENTRIES; i++)
        n += cache[i].data != NULL;
    if (entries) *entries = n;
    return cache_bytes;
}

const float *wb_prepack_get(const void *isa_ptr, wb_storage *b, int64_t b_offset, int64_t k, int64_t n, int64_t rsb,
                            int64_t csb, wb_storage *b_up, int64_t up_offset, int bf16) {
    const wb_cpu_isa *isa = isa_ptr;
    uint64_t id = b->id, version = b->version;
    uint64_t up_id = b_up ? b_up->id : 0, up_version = b_up ? b_up->version : 0;
    if (!b_up) up_offset = 0;
    const wb_gemm_blocking blocking = wb_gemm_blocking_of(isa);
    entry *free_slot = NULL;
    for (int i = 0; i < CACHE_ENTRIES; i++) {
        entry *e = &cache[i];
        if (!e->data) {
            if (!free_slot) free_slot = e;
            continue;
        }
        if (e->isa == isa && e->id == id && e->offset == b_offset && e->k == k && e->n == n && e->rsb == rsb &&
            e->csb == csb && e->up_id == up_id && e->up_offset == up_offset && e->bf16 == bf16 && e->kc == blocking.kc &&
            e->forced == (int)blocking.forced) {
            if (e->version == version && e->up_version == up_version) {
                e->last_use = ++clock_ticks;
                return e->data;
            }
            drop(e); /* written since it was packed */
            if (!free_slot) free_slot = e;
            continue;
        }
    }
    int64_t kp = bf16 && isa->bf16_pairs ? (k + 1) / 2 : k; /* pair space: one word per k-pair */
    size_t bytes = wb_gemm_packed_b_floats(isa, kp, n, b_up != NULL) * sizeof(float);
    if (bytes > CACHE_BYTES / 2) return NULL;
    while (cache_bytes + bytes > CACHE_BYTES || !free_slot) { /* evict least recently used */
        entry *lru = NULL;
        for (int i = 0; i < CACHE_ENTRIES; i++)
            if (cache[i].data && (!lru || cache[i].last_use < lru->last_use)) lru = &cache[i];
        if (!lru) break;
        drop(lru);
        if (!free_slot) free_slot = lru;
    }
    float *data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data) return NULL;
    if (bf16 && isa->bf16_pairs) { /* k-pair words, packed as they are */
        int64_t ld = 0, ld_up = 0, k2 = (k + 1) / 2;
        uint16_t *cb = NULL, *cu = NULL;
        int force = b_up != NULL; /* gate and up in one layout */
        const uint32_t *w = wb_bf16_pair_words((const uint16_t *)b->data + b_offset, n, k, csb, rsb, force, &ld, &cb);
        const uint32_t *wu =
            b_up ? wb_bf16_pair_words((const uint16_t *)b_up->data + up_offset, n, k, csb, rsb, force, &ld_up, &cu)
                 : NULL;
        if (!w || (b_up && !wu)) {
            free(cb), free(cu), free(data);
            return NULL;
        }
        wb_gemm_pack_b(isa, k2, n, (const float *)w, 1, ld, (const float *)wu, data);
        free(cb), free(cu);
    } else if (bf16) { /* widen to contiguous f32 [k, n] copies, then pack those */
        int64_t shape[2] = {k, n}, dst_stride[2] = {n, 1}, src_stride[2] = {rsb, csb};
        float *wide = malloc((size_t)(k * n) * sizeof(float) * (b_up ? 2 : 1));
        if (!wide) {
            free(data);
            return NULL;
        }
        wb_cpu_convert(wide, WB_CPU_F32, dst_stride, (const uint16_t *)b->data + b_offset, WB_CPU_BF16, src_stride, 2,
                       shape);
        if (b_up)
            wb_cpu_convert(wide + k * n, WB_CPU_F32, dst_stride, (const uint16_t *)b_up->data + up_offset, WB_CPU_BF16,
                           src_stride, 2, shape);
        wb_gemm_pack_b(isa, k, n, wide, n, 1, b_up ? wide + k * n : NULL, data);
        free(wide);
    } else {
        wb_gemm_pack_b(isa, k, n, (const float *)b->data + b_offset, rsb, csb,
                       b_up ? (const float *)b_up->data + up_offset : NULL, data);
    }
    *free_slot = (entry){.isa = isa,
                         .id = id,
                         .version = version,
                         .up_id = up_id,
                         .up_version = up_version,
                         .offset = b_offset,
                         .up_offset = up_offset,
                         .k = k,
                         .n = n,
                         .rsb = rsb,
                         .csb = csb,
                         .bf16 = bf16,
                         .kc = blocking.kc,
                         .forced = (int)blocking.forced,
                         .data = data,
                         .bytes = bytes,
                         .last_use = ++clock_ticks};
    cache_bytes += bytes;
    if (cache_entries++ == 0) wb_storage_set_free_hook(wb_prepack_forget); /* storage is below us */
    return data;
}

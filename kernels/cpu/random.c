/* random.c: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011).
 * A counter-based generator: block j of a draw is philox(key = seed, counter = offset + j), so
 * every element is a pure function of (seed, offset, index) and the thread count cannot change
 * the numbers. */
#include <math.h>

#include "wb_kernels/pointwise.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void wb_philox4x32_10(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
        k0 += PHILOX_W0, k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* 24 random bits -> [0, 1). */
static inline float uniform01(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

void wb_cpu_rand_f32(float *out, int64_t n, uint64_t seed, uint64_t offset) {
    int64_t blocks = (n + 3) / 4;
    WB_CPU_PARALLEL(wb_cpu_threads_for(n), {
        int64_t lo, hi;
        wb_cpu_share(blocks, &lo, &hi);
        for (int64_t j = lo; j < hi; j++) {
            uint32_t r[4];
            wb_philox4x32_10(seed, offset + (uint64_t)j, r);
            for (int k = 0; k < 4 && 4 * j + k < n; k++)
                out[4 * j + k] = uniform01(r[k]);
        }
    });
}

/* Box-Muller on the first two words of each block: elements 2j and 2j+1 are the cosine and
 * sine halves of one pair. */
void wb_cpu_randn_f32(float *out, int64_t n, uint64_t seed, uint64_t offset) {
    int64_t blocks = (n + 1) / 2;
    WB_CPU_PARALLEL(wb_cpu_threads_for(n), {
        int64_t lo, hi;
        wb_cpu_share(blocks, &lo, &hi);
        for (int64_t j = lo; j < hi; j++) {
            uint32_t r[4];
            wb_philox4x32_10(seed, offset + (uint64_t)j, r);
            double u1 = ((double)r[0] + 1.0) / 4294967296.0; /* (0, 1]: log is finite */
            double u2 = (double)r[1] / 4294967296.0;
            double radius = sqrt(-2.0 * log(u1)), angle = 2.0 * M_PI * u2;
            out[2 * j] = (float)(radius * cos(angle));
            if (2 * j + 1 < n) out[2 * j + 1] = (float)(radius * sin(angle));
        }
    });
}

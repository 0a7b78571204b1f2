/* test_data.h: deterministic test data for the C tests (the same sequence on every machine and
 * run): a xorshift generator of floats in [-1, 1). */
#ifndef WB_TEST_DATA_H
#define WB_TEST_DATA_H

#include <stdint.h>

static uint64_t rng = 88172645463325252ull;
static inline float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#endif

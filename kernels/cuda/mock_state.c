/* mock_state.c: the mock plugin's CUDA state and rules of failure (see mock_plugin.c): CUDA's
 * error numbers and names, the pending error cudaGetLastError would return, a sticky fault that
 * ends every later call, the stream's capture mode, and the clock its records are stamped with. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "mock_internal.h"

const char *mock_err_name(int e) {
    return e == MOCK_ERR_MEMORY                ? "cudaErrorMemoryAllocation"
           : e == MOCK_ERR_MISALIGNED          ? "cudaErrorMisalignedAddress"
           : e == MOCK_ERR_CAPTURE_UNSUPPORTED ? "cudaErrorStreamCaptureUnsupported"
           : e == MOCK_ERR_CAPTURE_INVALIDATED ? "cudaErrorStreamCaptureInvalidated"
                                               : "cudaErrorUnknown";
}
const char *mock_err_string(int e) {
    return e == MOCK_ERR_MISALIGNED            ? "misaligned address"
           : e == MOCK_ERR_CAPTURE_UNSUPPORTED ? "operation not permitted when stream is capturing"
           : e == MOCK_ERR_CAPTURE_INVALIDATED ? "operation failed due to a previous error during capture"
                                               : mock_err_name(e);
}

int mock_pending, mock_sticky; /* cudaGetLastError's error; a fault that ends every later call */
int mock_capturing, mock_relaxed, mock_invalidated;
int mock_fail(const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return wbcu_fail("%s", buf);
}

/* A call CUDA refuses while capturing in thread-local mode: it fails and invalidates the capture. */
int mock_refused_in_capture(const char *what) {
    if (!mock_capturing || mock_relaxed) return 0;
    mock_invalidated = 1;
    mock_pending = MOCK_ERR_CAPTURE_UNSUPPORTED;
    wbcu_device_fail(MOCK_ERR_CAPTURE_UNSUPPORTED, what);
    return MOCK_ERR_CAPTURE_UNSUPPORTED;
}

int mock_stuck(const char *what) { return mock_sticky ? wbcu_device_fail(mock_sticky, what) : 0; }

uint64_t mock_now_ns(void) { /* CLOCK_MONOTONIC, as CUPTI stamps with the plugin's timestamp callback */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

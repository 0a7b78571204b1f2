/* plugin_trace.c: the plugin's CUPTI activity tracer: buffers handed to CUPTI, completed ones
 * queued under a mutex and flattened into wb_cuda_record on the caller's thread, external
 * correlation ids pushed for the core's ops, and the clock (the profiler's CLOCK_MONOTONIC,
 * handed to CUPTI).
 *
 * The activity kinds are enabled once per process and never disabled: disabling
 * CONCURRENT_KERNEL could deadlock in CUPTI 13.0 (FlushAll could crash; fixed in an update), and
 * sessions after the first got wrong correlation ids for graph kernels until 13.1. A session is a
 * window instead: records that start before it, or arrive between sessions, are dropped. */
#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin_internal.h"

/* ---- CUPTI --------------------------------------------------------------------------------- *
 * Buffers of 4 MiB are handed to CUPTI; completed ones (filled on CUPTI's thread) are queued
 * under a mutex and parsed by trace_flush on the caller's thread after a forced flush. */
#define TRACE_BUFFER (4u << 20)
typedef struct done_buffer {
    uint8_t *data;
    size_t valid;
    struct done_buffer *next;
} done_buffer;
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static done_buffer *done_head, *done_tail;
static uint64_t dropped_total;
static int callbacks_registered, kinds_enabled, clock_monotonic;
static volatile int tracing; /* read on CUPTI's thread */
static uint64_t session_start;

/* CUPTI's timestamps on the profiler's clock: no offset to measure, immune to clock steps. */
static uint64_t CUPTIAPI monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void free_list(done_buffer *d) {
    while (d) {
        done_buffer *next = d->next;
        free(d->data);
        free(d);
        d = next;
    }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, TRACE_BUFFER);
    *size = *buffer ? TRACE_BUFFER : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped) {
        pthread_mutex_lock(&trace_mu);
        dropped_total += dropped;
        pthread_mutex_unlock(&trace_mu);
    }
    done_buffer *d = tracing ? malloc(sizeof *d) : NULL; /* between sessions: dropped */
    if (!d) {
        free(buffer);
        return;
    }
    d->data = buffer;
    d->valid = valid;
    d->next = NULL;
    pthread_mutex_lock(&trace_mu);
    if (done_tail)
        done_tail->next = d;
    else
        done_head = d;
    done_tail = d;
    pthread_mutex_unlock(&trace_mu);
}

/* Kernels, the API calls that launch them and the external correlation that ties them to our
 * ops are required; copies, memsets and synchronisation are best effort. */
static const CUpti_ActivityKind trace_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS    (int)(sizeof trace_kinds / sizeof trace_kinds[0])
#define NREQUIRED 4
static int kind_on[NKINDS];

static int cupti_fail(CUptiResult r, const char *what) {
    const char *s = NULL;
    cuptiGetResultString(r, &s);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return wbcu_fail("%s: another profiler (Nsight Systems or Nsight Compute?) already holds CUPTI; device "
                         "kernels are not traced in this run (%s)",
                         what, s ? s : "?");
    return wbcu_fail("%s failed: CUPTI error %d (%s)", what, (int)r, s ? s : "?");
}

int wbcu_trace_start(void) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    if (tracing) return 0;
    CUptiResult r;
    if (!callbacks_registered) {
        /* before any kind is enabled, so that every record uses it */
        clock_monotonic = cuptiActivityRegisterTimestampCallback(monotonic_ns) == CUPTI_SUCCESS;
        r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (r != CUPTI_SUCCESS) return cupti_fail(r, "cuptiActivityRegisterCallbacks");
        callbacks_registered = 1;
    }
    if (!kinds_enabled) {
        for (int i = 0; i < NKINDS; i++) {
            r = cuptiActivityEnable(trace_kinds[i]);
            kind_on[i] = r == CUPTI_SUCCESS;
            if (!kind_on[i] && i < NREQUIRED) {
                for (int j = 0; j < i; j++)
                    if (kind_on[j]) cuptiActivityDisable(trace_kinds[j]), kind_on[j] = 0;
                return cupti_fail(r, "cuptiActivityEnable");
            }
        }
        kinds_enabled = 1;
    }
    pthread_mutex_lock(&trace_mu); /* what completed since the last session is not this one's */
    done_buffer *old = done_head;
    done_head = done_tail = NULL;
    dropped_total = 0;
    pthread_mutex_unlock(&trace_mu);
    free_list(old);
    wbcu_timestamp(&session_start);
    tracing = 1;
    return 0;
}

void wbcu_trace_stop(void) { tracing = 0; }

static int api_kind_of(const char *name) {
    if (!name) return WB_CU_API_OTHER;
    if (strstr(name, "GraphLaunch")) return WB_CU_API_GRAPH_LAUNCH;
    if (strstr(name, "LaunchKernel") || strstr(name, "LaunchCooperativeKernel")) return WB_CU_API_LAUNCH;
    if (strstr(name, "Occupancy")) return WB_CU_API_OCCUPANCY;
    if (strstr(name, "Synchronize")) return WB_CU_API_SYNC;
    return WB_CU_API_OTHER;
}

static const char *copy_kind_name(int k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    default: return "Memcpy";
    }
}

/* The fields copy and memset records share (CUPTI's structs differ, the names agree). */
#define TRANSFER_FIELDS(r, m)                                                                                          \
    ((r).start_ns = (m)->start, (r).end_ns = (m)->end, (r).correlation = (m)->correlationId,                           \
     (r).device = (m)->deviceId, (r).stream = (m)->streamId, (r).bytes = (m)->bytes)

static void deliver(CUpti_Activity *a, wb_cuda_record_fn fn, void *user) {
    if (!tracing) return;
    wb_cuda_record r;
    memset(&r, 0, sizeof r);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
        r.kind = WB_CU_REC_KERNEL;
        r.name = wbcu_demangle(k->name);
        r.start_ns = k->start;
        r.end_ns = k->end;
        r.correlation = k->correlationId;
        r.device = k->deviceId;
        r.stream = k->streamId;
        r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
        r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
        r.graph_id = k->graphId;
        r.graph_node_id = (uint32_t)k->graphNodeId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *api = (const CUpti_ActivityAPI *)a;
        r.kind = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? WB_CU_REC_RUNTIME : WB_CU_REC_DRIVER;
        const char *name = NULL;
        cuptiGetCallbackName(a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                    : CUPTI_CB_DOMAIN_DRIVER_API,
                             api->cbid, &name);
        r.name = name ? name : "cuda api";
        r.cbid = (int)api->cbid;
        r.api_kind = api_kind_of(name);
        r.start_ns = api->start;
        r.end_ns = api->end;
        r.correlation = api->correlationId;
        r.thread = api->threadId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
        r.kind = WB_CU_REC_MEMCPY;
        r.name = copy_kind_name(m->copyKind);
        TRANSFER_FIELDS(r, m);
        r.graph_id = m->graphId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
        r.kind = WB_CU_REC_MEMSET;
        r.name = "Memset";
        TRANSFER_FIELDS(r, m);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)a;
        r.kind = WB_CU_REC_SYNC;
        r.name = s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE    ? "sync wait: stream"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE ? "sync wait: context"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE   ? "sync wait: event"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT   ? "sync wait: stream wait event"
                                                                                      : "sync wait";
        r.start_ns = s->start;
        r.end_ns = s->end;
        r.correlation = s->correlationId;
        r.stream = s->streamId;
        break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)a;
        r.kind = WB_CU_REC_EXTERNAL;
        r.correlation = x->correlationId;
        r.external_id = x->externalId;
        break;
    }
    default: return;
    }
    /* before the session (buffered between sessions); 0 is "not collected": the core counts it */
    if (r.start_ns && r.start_ns < session_start) return;
    fn(user, &r);
}

int wbcu_trace_flush(wb_cuda_record_fn fn, void *user, uint64_t *dropped) {
    if (!wbcu_ready) return wbcu_fail("the CUDA plugin is not initialised");
    cudaStreamSynchronize(wbcu_stream);
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) return cupti_fail(r, "cuptiActivityFlushAll");
    pthread_mutex_lock(&trace_mu);
    done_buffer *list = done_head;
    done_head = done_tail = NULL;
    *dropped = dropped_total;
    dropped_total = 0;
    pthread_mutex_unlock(&trace_mu);
    for (done_buffer *d = list; d; d = d->next) {
        CUpti_Activity *rec = NULL;
        while (cuptiActivityGetNextRecord(d->data, d->valid, &rec) == CUPTI_SUCCESS)
            deliver(rec, fn, user);
    }
    free_list(list);
    return 0;
}

void wbcu_push_correlation(uint64_t id) {
    if (tracing) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void wbcu_pop_correlation(void) {
    uint64_t id;
    if (tracing) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
}

int wbcu_timestamp(uint64_t *ns) {
    if (clock_monotonic) {
        *ns = monotonic_ns();
        return 0;
    }
    CUptiResult r = cuptiGetTimestamp(ns);
    if (r != CUPTI_SUCCESS) return cupti_fail(r, "cuptiGetTimestamp");
    return 0;
}

int wbcu_trace_clock(void) { return clock_monotonic ? WB_CU_CLOCK_MONOTONIC : WB_CU_CLOCK_REALTIME; }

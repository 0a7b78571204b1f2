/* mock_trace.c: the mock plugin's CUPTI (see mock_plugin.c): activity records of API calls,
 * kernels, copies and waits, with correlation ids and the external ids the core pushes, kept
 * until the core flushes them; kernel names interned for the records' life. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_internal.h"

static int tracing;
static uint32_t next_corr = 1;
#define MAX_EXT 64
static uint64_t ext_stack[MAX_EXT];
static int ext_depth;
#define MAX_RECORDS 65536
static wb_cuda_record records[MAX_RECORDS];
static int nrecords;
static uint64_t dropped;

void mock_record(const wb_cuda_record *r) {
    if (!tracing) return;
    if (nrecords == MAX_RECORDS) {
        dropped++;
        return;
    }
    records[nrecords++] = *r;
}

/* An API call: its runtime record, and the external id of the op that made it. */
uint32_t mock_api_call(int kind, const char *name, int cbid, int api_kind, uint64_t t0) {
    uint32_t corr = next_corr++;
    wb_cuda_record r = {0};
    r.kind = kind;
    r.name = name;
    r.cbid = cbid;
    r.api_kind = api_kind;
    r.start_ns = t0;
    r.end_ns = mock_now_ns();
    r.correlation = corr;
    mock_record(&r);
    if (ext_depth > 0 && ext_depth <= MAX_EXT) {
        wb_cuda_record x = {0};
        x.kind = WB_CU_REC_EXTERNAL;
        x.correlation = corr;
        x.external_id = ext_stack[ext_depth - 1];
        mock_record(&x);
    }
    return corr;
}

#define MAX_NAMES 1024
static char names[MAX_NAMES][128];
static int nnames;
const char *mock_intern(const char *s) {
    for (int i = 0; i < nnames; i++)
        if (!strcmp(names[i], s)) return names[i];
    if (nnames == MAX_NAMES) return "mock_kernel";
    snprintf(names[nnames], sizeof names[nnames], "%s", s);
    return names[nnames++];
}

int mock_trace_start(void) {
    if (getenv("WB_MOCK_TRACE_START_FAIL"))
        return mock_fail("mock: cuptiActivityEnable failed: CUPTI error 999 (CUPTI_ERROR_UNKNOWN)");
    tracing = 1;
    return 0;
}

int mock_trace_flush(wb_cuda_record_fn fn, void *user, uint64_t *d) {
    for (int i = 0; i < nrecords; i++)
        fn(user, &records[i]);
    nrecords = 0;
    *d = dropped;
    dropped = 0;
    return 0;
}

void mock_trace_stop(void) { tracing = 0; }

void mock_push(uint64_t id) {
    if (ext_depth < MAX_EXT) ext_stack[ext_depth] = id;
    ext_depth++;
}

void mock_pop(void) {
    if (ext_depth > 0) ext_depth--;
}

int mock_timestamp(uint64_t *ns) {
    *ns = mock_now_ns();
    return 0;
}

int mock_trace_clock(void) { return WB_CU_CLOCK_MONOTONIC; }

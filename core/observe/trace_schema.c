/* trace_schema.c: the table of an event's fields (wb/trace_schema.h) with their members in
 * wb_trace_event, and the lookups the reader and from_events share. */
#include <string.h>

#include <wb/trace_schema.h>

#define WB_TF_ROW(id, place, key_, type_, member, count, lplace, lkey, kinds_, doc_)                                   \
    [WB_TF_##id] = {.trace = place,                                                                                   \
                    .key = key_,                                                                                      \
                    .type = type_,                                                                                    \
                    .offset = offsetof(wb_trace_event, member),                                                       \
                    .size = sizeof(((wb_trace_event *)0)->member),                                                    \
                    .count_offset = offsetof(wb_trace_event, count),                                                  \
                    .lua = lplace,                                                                                    \
                    .lua_key = lkey,                                                                                  \
                    .kinds = kinds_,                                                                                  \
                    .doc = doc_},
const wb_trace_field wb_trace_fields[WB_TF_COUNT] = {WB_TRACE_FIELDS(WB_TF_ROW)};

const wb_trace_field *wb_trace_field_find(int place, const char *key) {
    for (int i = 0; i < WB_TF_COUNT; i++) {
        const wb_trace_field *f = &wb_trace_fields[i];
        if (f->trace == place && f->key[0] == key[0] && !strcmp(f->key, key)) return f;
    }
    return NULL;
}

void wb_trace_field_seen(wb_trace_event *x, const wb_trace_field *f) {
    if (f == &wb_trace_fields[WB_TF_RUN_DELAY]) x->has_run_delay = 1;
    if (f == &wb_trace_fields[WB_TF_IN_STRIDE]) x->geometry = 1;
}

const char *wb_trace_type_name(wb_trace_type t) {
    static const char *const names[] = {"string", "integer", "number", "count", "time", "boolean",
                                         "integers", "shapes", "dtypes"};
    return t >= WB_TT_STR && t <= WB_TT_DTYPES ? names[t] : "?";
}

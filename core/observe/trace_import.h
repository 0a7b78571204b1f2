/* trace_import.h: traces other tools wrote, mapped onto the workbench's events as trace_read.c
 * streams them: torch.profiler's Kineto JSON, the legacy profiler's bare array, and any other
 * Chrome trace (its complete events as ranges). One event at a time; what the trace carried
 * (which fields, how many of each) is kept for the rules, which say what they could not check. */
#ifndef WB_TRACE_IMPORT_H
#define WB_TRACE_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include <wb/profiler.h>

typedef struct wb_import wb_import;

wb_import *wb_import_new(void);
void wb_import_free(wb_import *im);
/* A member beside traceEvents that only Kineto writes (schemaVersion, deviceProperties, ...)? */
int wb_import_kineto_member(const char *name);
/* The document is a bare list of events (the legacy profiler's form, or any array trace). */
void wb_import_bare_array(wb_import *im);
/* One event's JSON text, mapped and appended to p; 0 when it is not an event object that the
 * format allows (a field of the wrong type). */
int wb_import_event(wb_import *im, wb_prof *p, const char *json);
/* Why wb_import_event refused the last event, where it can say more than the generic message
 * (a negative "dur"), else NULL. */
const char *wb_import_why(const wb_import *im);
/* After the document: links the device work whose launch came after it in the file. */
void wb_import_finish(wb_import *im, wb_prof *p);
/* What the trace carried, as the members of a JSON object ("format": "kineto", "ops": n, ...),
 * for the "import" member the Lua side reads; malloc'ed. */
char *wb_import_summary(const wb_import *im);
/* A string kept for the life of the process (kernel kinds keep their names). */
const char *wb_trace_lasting(const char *s);

#endif

/* intern.c: stable copies of kernel names built at run time, so a kernel descriptor (and the
 * profiler events that keep it) can point at the name for the life of the process. */
#include <stdlib.h>
#include <string.h>

#include "linear_ops.h"

#define INTERN_MAX 1024

static const char *names[INTERN_MAX];
static int count;

const char *wb_intern(const char *name) {
    for (int i = count - 1; i >= 0; i--)
        if (!strcmp(names[i], name)) return names[i];
    if (count == INTERN_MAX) return "wb_kernel_name_table_full";
    char *copy = strdup(name);
    if (!copy) return "wb_kernel_name_out_of_memory";
    names[count++] = copy;
    return copy;
}

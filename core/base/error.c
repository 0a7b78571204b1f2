/* error.c: the thread-local error message behind every failed wb_status, and the byte counts
 * messages quote. The core never aborts on bad input: it returns a status and leaves a message
 * here. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <wb/wb.h>

#define WB_ERROR_LEN 1024

static _Thread_local char error_message[WB_ERROR_LEN] = "no error";

const char *wb_error_message(void) { return error_message; }

wb_status wb_error(wb_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return status;
}

void wb_format_bytes(double bytes, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 6) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", bytes);
    else
        snprintf(buf, len, "%.1f %s", bytes, units[u]);
}

wb_status wb_error_prefix(wb_status status, const char *context) {
    size_t n = strlen(context), m = strlen(error_message);
    /* Do not stack the same prefix twice ("view: view: ..."). */
    if (strncmp(error_message, context, n) == 0 && error_message[n] == ':') return status;
    if (n + 3 >= WB_ERROR_LEN) return status;
    if (m > WB_ERROR_LEN - 1 - (n + 2)) m = WB_ERROR_LEN - 1 - (n + 2);
    memmove(error_message + n + 2, error_message, m);
    memcpy(error_message, context, n);
    error_message[n] = ':';
    error_message[n + 1] = ' ';
    error_message[n + 2 + m] = '\0';
    return status;
}

/* graph_inputs.c: pointing a graph's replays at new input buffers without copying them (the
 * dispatch-free replay wb.compile uses). Each kernel family lists the byte offsets of its data
 * pointers in its launch layout (op.h); declaring an input finds, in every copied context, the
 * listed pointers that point into the input's elements and remembers them with their offset from
 * the input's first element, so a view at an offset inside the input is rebound correctly.
 * Rebinding writes new_base + offset into those fields.
 *
 * Why listed offsets and not a scan of the context for values that look like pointers into the
 * input: a scan would also rewrite a non-pointer word that happens to hold such a value (a float
 * and its padding, a stale stack word in a hole of the struct). The scan is kept, but only to
 * refuse: a word that points into the input outside the listed fields (a family whose list is
 * incomplete), or that equals the input's storage object outside the listed storage fields
 * (cached state keyed on the storage, which a pointer rewrite would leave stale), makes the input
 * non-rebindable, and the caller copies into it as before. A listed storage field (a GEMM's
 * prepacked weight: the key of the packing cache) moves to the bound tensor's storage and offset,
 * and the family's refresh packs that weight before the replay (once: the cache keeps it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"
#include "storage.h"

/* Bytes from t's first element to one past its last (0 when empty). */
static size_t extent_bytes(const wb_tensor *t) {
    if (wb_tensor_numel(t) == 0) return 0;
    int64_t last = 0;
    for (int d = 0; d < t->ndim; d++)
        last += (t->shape[d] - 1) * t->stride[d];
    return (size_t)(last + 1) * wb_dtype_size(t->dtype);
}

static int listed(const wb_launch_layout *layout, size_t offset) {
    for (int i = 0; i < layout->npointers; i++)
        if (layout->pointers[i] == offset) return 1;
    return 0;
}

static const wb_launch_storage *listed_storage(const wb_launch_layout *layout, size_t offset) {
    for (int i = 0; i < layout->nstorages; i++)
        if (layout->storages[i].storage == offset) return &layout->storages[i];
    return NULL;
}

static int add_slot(graph_input *in, size_t *cap, input_slot slot) {
    if (in->nslots == *cap) {
        size_t n = *cap ? *cap * 2 : 8;
        input_slot *q = realloc(in->slots, n * sizeof *q);
        if (!q) return 0;
        in->slots = q, *cap = n;
    }
    in->slots[in->nslots++] = slot;
    return 1;
}

/* Finds the slots of input `in` in node `nd`; on a reason to refuse, fills in->why_not. */
static int scan_node(graph_input *in, const node *nd, size_t *cap) {
    const char *sbase = in->captured.storage->data, *send = sbase + in->captured.storage->nbytes;
    const char *base = wb_tensor_data(&in->captured), *end = base + extent_bytes(&in->captured);
    for (size_t off = 0; off + sizeof(void *) <= nd->layout->size; off += sizeof(void *)) {
        const char *p;
        memcpy(&p, (char *)nd->ctx + off, sizeof p);
        if (p == (const char *)in->captured.storage) {
            const wb_launch_storage *ls = listed_storage(nd->layout, off);
            if (!ls) {
                snprintf(in->why_not, sizeof in->why_not, "kernel %s keys cached state on its storage",
                         wb_kernel_kind_name(nd->desc.kind));
                return 1;
            }
            int64_t at_offset;
            memcpy(&at_offset, (char *)nd->ctx + ls->offset, sizeof at_offset);
            if (!add_slot(in, cap, (input_slot){(char *)nd->ctx + off, at_offset - in->captured.offset,
                                                (char *)nd->ctx + ls->offset}))
                return 0;
            continue;
        }
        if (p < sbase || p >= send) continue;
        if (!listed(nd->layout, off) || p >= end || p < base) {
            snprintf(in->why_not, sizeof in->why_not, "kernel %s keeps a pointer into it that cannot be rebound",
                     wb_kernel_kind_name(nd->desc.kind));
            return 1;
        }
        if (!add_slot(in, cap, (input_slot){(char *)nd->ctx + off, p - base, NULL})) return 0;
    }
    return 1;
}

wb_status wb_graph_input_declare(wb_graph *g, const wb_tensor *t, int *index, const char **why_not) {
    *index = -1;
    *why_not = NULL;
    if (g->capturing) return wb_error(WB_ERR_ARGUMENT, "graph.input: the graph is being captured");
    graph_input *q = realloc(g->inputs, (size_t)(g->ninputs + 1) * sizeof *q);
    if (!q) return wb_error(WB_ERR_MEMORY, "graph.input: out of memory");
    g->inputs = q;
    graph_input *in = &g->inputs[g->ninputs];
    *in = (graph_input){.captured = *t};
    wb_storage_retain(t->storage);
    in->base = wb_tensor_data(t);
    if (g->device_nodes)
        snprintf(in->why_not, sizeof in->why_not, "a %s graph replays its launches as captured",
                 g->queue ? g->queue->name : "device");
    else if (wb_ptrset_has(&g->written_set, t->storage))
        snprintf(in->why_not, sizeof in->why_not, "the graph writes into it");
    size_t cap = 0;
    for (size_t i = 0; i < g->n && !in->why_not[0]; i++)
        if (!scan_node(in, &g->nodes[i], &cap)) {
            wb_storage_release(t->storage);
            free(in->slots);
            return wb_error(WB_ERR_MEMORY, "graph.input: out of memory");
        }
    if (in->why_not[0]) in->nslots = 0;
    *index = g->ninputs++;
    *why_not = in->why_not[0] ? in->why_not : NULL;
    return WB_OK;
}

static int same_geometry(const wb_tensor *a, const wb_tensor *b) {
    if (a->dtype != b->dtype || a->device != b->device || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d])) return 0;
    return 1;
}

/* Points the data slots at tensor t's elements and the storage fields at t's storage and offset;
 * s (NULL: the captured storage) is retained as the one bound. */
static void point_at(graph_input *in, wb_storage *s, const wb_tensor *t) {
    const char *base = wb_tensor_data(t);
    if (base == in->base && s == in->bound) return;
    for (size_t i = 0; i < in->nslots; i++) {
        const input_slot *slot = &in->slots[i];
        if (slot->offset_at) {
            wb_storage *key = t->storage;
            int64_t offset = t->offset + slot->rel;
            memcpy(slot->at, &key, sizeof key);
            memcpy(slot->offset_at, &offset, sizeof offset);
            continue;
        }
        const char *p = base + slot->rel;
        memcpy(slot->at, &p, sizeof p);
    }
    if (s) wb_storage_retain(s);
    if (in->bound) wb_storage_release(in->bound);
    in->bound = s, in->base = base;
}

int wb_graph_input_bind(wb_graph *g, int index, const wb_tensor *t) {
    if (index < 0 || index >= g->ninputs) return 0;
    graph_input *in = &g->inputs[index];
    /* an input that aliases a buffer the graph writes (one of its outputs, passed back in) would
     * be overwritten while it is read: it goes through the copy */
    int ok = t && !in->why_not[0] && same_geometry(t, &in->captured) && !wb_ptrset_has(&g->written_set, t->storage);
    if (ok)
        point_at(in, t->storage == in->captured.storage ? NULL : t->storage, t);
    else
        point_at(in, NULL, &in->captured);
    return ok;
}

int wb_graph_input_count(const wb_graph *g) { return g->ninputs; }

int wb_graph_input_fits(const wb_graph *g, int index, const wb_tensor *t) {
    if (index < 0 || index >= g->ninputs) return 0;
    const wb_tensor *c = &g->inputs[index].captured;
    if (t->dtype != c->dtype || t->device != c->device || t->ndim != c->ndim) return 0;
    return !memcmp(t->shape, c->shape, sizeof(int64_t) * (size_t)t->ndim);
}

wb_status wb_graph_input_set(wb_graph *g, int index, wb_tensor *t) {
    if (!wb_graph_input_fits(g, index, t))
        return wb_error(WB_ERR_SHAPE, "graph.run: argument %d does not fit input %d (dtype, device or shape)", index + 1,
                        index + 1);
    if (wb_graph_input_bind(g, index, t)) return WB_OK;
    return wb_copy_(&g->inputs[index].captured, t);
}

void wb_graph_inputs_clear(wb_graph *g) {
    for (int i = 0; i < g->ninputs; i++) {
        graph_input *in = &g->inputs[i];
        if (in->bound) wb_storage_release(in->bound);
        wb_storage_release(in->captured.storage);
        free(in->slots);
    }
    g->ninputs = 0;
}

/*
 * report_tables.c - sections of the report built on the table model
 * (table.h): each builder gives one table that the text, JSON and HTML
 * writers render alike.
 */
#include <stdlib.h>

#include "analysis.h"
#include "table.h"

static const char *S(const loom__report *r, uint32_t id) { return loom__trace_cstr(r->meta, id); }

/* Copies by direction and fills by name: count, bytes, time, bandwidth
 * (bytes / ns = GB/s).  which: 1 copies, 2 fills, 3 both (copies first). */
#define MOVE_COLS(first, title)                                                                   \
  {{first, title, LOOM__COL_STR}, {"count", "count", LOOM__COL_INT}, {"bytes", "bytes", LOOM__COL_INT}, \
   {"time_ns", "time", LOOM__COL_US}, {"bandwidth_gbps", "GB/s", LOOM__COL_NUM}}
static const loom__col move_cols[3][5] = {MOVE_COLS("direction", "direction"), MOVE_COLS("name", "fill"),
                                          MOVE_COLS("name", "direction / fill")};

loom__table *loom__report_moves(const loom__report *r, int which, const char *title) {
  loom__table *t = loom__table_new(which == 2 ? "fills" : "transfers", title, move_cols[which - 1], 5);
  for (int g = 0; t && g < 2; g++) {
    if (!(which & (1 << g))) continue;
    size_t n, *rows = loom__report_rows(r, g ? LOOM__G_FILL : LOOM__G_COPY, &n, 0);
    for (size_t i = 0; i < n; i++) {
      const loom__rname *c = &r->names[rows[i]];
      loom__table_str(t, S(r, c->name));
      loom__table_int(t, (int64_t)c->count);
      loom__table_int(t, (int64_t)c->bytes);
      loom__table_int(t, c->total);
      loom__table_num(t, c->total > 0 ? (double)c->bytes / (double)c->total : 0);
    }
    free(rows);
  }
  return t;
}

/* Host ops, user ranges or runtime calls per name, by total (or self)
 * time; user ranges add the device work launched inside them. */
static const loom__col host_cols[] = {
    {"name", "name", LOOM__COL_STR}, {"count", "count", LOOM__COL_INT}, {"total_ns", "total", LOOM__COL_US},
    {"self_ns", "self", LOOM__COL_US}, {"min_ns", "min", LOOM__COL_US}, {"max_ns", "max", LOOM__COL_US},
    {"device_time_ns", "device", LOOM__COL_US}, {"device_work", "work", LOOM__COL_INT}};

loom__table *loom__report_host(const loom__report *r, int group, int by_self, const char *title) {
  loom__table *t = loom__table_new("host", title, host_cols, group == LOOM__G_RANGE ? 8 : 6);
  size_t n, *rows = loom__report_rows(r, group, &n, by_self);
  for (size_t i = 0; t && i < n; i++) {
    const loom__rname *k = &r->names[rows[i]];
    loom__table_str(t, S(r, k->name));
    loom__table_int(t, (int64_t)k->count);
    loom__table_int(t, k->total);
    loom__table_int(t, k->self);
    loom__table_int(t, k->min);
    loom__table_int(t, k->max);
    if (group != LOOM__G_RANGE) continue;
    loom__table_int(t, k->dev_time);
    loom__table_int(t, (int64_t)k->dev_count);
  }
  free(rows);
  return t;
}

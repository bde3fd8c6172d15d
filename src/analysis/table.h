/*
 * table.h - the report's table model: a table is a key, a title, typed
 * columns, rows of cells and notes; the text, JSON and HTML writers render
 * any table the same way (docs/report.md, "Tables").  Sections built on it
 * need no writer code of their own.
 */
#ifndef LOOM_TABLE_H
#define LOOM_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* Column types: how a cell is printed.  NS: integer nanoseconds (JSON keys
 * end in _ns; text prints ms with 3 decimals). */
enum { LOOM__COL_STR, LOOM__COL_INT, LOOM__COL_NS, LOOM__COL_PCT, LOOM__COL_NUM, LOOM__COL_US };
/* NUM: a real number (JSON: an integer when integral, else 6 decimals;
 * text 3 decimals).  US: integer nanoseconds printed as us in text. */

typedef struct loom__col {
  const char *key;   /* JSON key (ends in _ns for NS columns) */
  const char *title; /* text and HTML header */
  int type;          /* LOOM__COL_* */
} loom__col;

typedef struct loom__cell {
  int null;          /* no value (JSON null, text "-") */
  int64_t i;
  double d;
  char *s;
} loom__cell;

typedef struct loom__table {
  const char *key;
  char *title;
  const loom__col *cols;
  size_t ncols;
  loom__cell *cells;  /* row-major */
  size_t ncells, cap;
  char **notes;
  size_t nnotes, cap_notes;
  int oom;
} loom__table;

/* cols must outlive the table (static arrays). */
loom__table *loom__table_new(const char *key, const char *title, const loom__col *cols, size_t ncols);
void loom__table_free(loom__table *t);
/* Cells are appended in row order: one per column per row. */
void loom__table_str(loom__table *t, const char *s);
void loom__table_int(loom__table *t, int64_t v);
void loom__table_pct(loom__table *t, double v);
void loom__table_null(loom__table *t);
void loom__table_num(loom__table *t, double v);
void loom__table_note(loom__table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t loom__table_rows(const loom__table *t);

struct loom__out;
/* top: rows shown, 0 = all (JSON always gives every row count in "rows"). */
void loom__table_text(const loom__table *t, struct loom__out *o, size_t top);
void loom__table_json(const loom__table *t, struct loom__out *o, size_t top);
void loom__table_html(const loom__table *t, struct loom__out *o, size_t top);
/* Only the rows, as a JSON array of objects (sections whose layout predates
 * the table model). */
void loom__table_json_rows(const loom__table *t, struct loom__out *o, size_t top);

#endif

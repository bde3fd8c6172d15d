/*
 * table.h - the report's table model (docs/report.md, "Tables").
 *
 * Every section of `loom report` is built once as tables: a table has a
 * title, typed columns (with units), rows of cells, notes, and a place in
 * the JSON document (a dotted path).  The text, JSON and HTML renderers
 * (table_text.c, table_json.c, table_html.c) render any table, so a new
 * section needs no writer code; the cross-rank section and every older one
 * are built on it.
 */
#ifndef LOOM_TABLE_H
#define LOOM_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* Column types: how a cell is printed.  NS and US hold integer (or, for
 * means and percentiles, real) nanoseconds, and JSON gives nanoseconds;
 * text and HTML print NS in ms and US in us, with 3 decimals.  PCT: a
 * share in percent.  NUM: a real number (JSON: an integer when integral,
 * else 6 decimals).  BOOL: JSON true/false.  INTS: an array of integers
 * (JSON only; the HTML charts draw them). */
enum { LOOM__COL_STR, LOOM__COL_INT, LOOM__COL_NS, LOOM__COL_PCT, LOOM__COL_NUM, LOOM__COL_US,
       LOOM__COL_BOOL, LOOM__COL_INTS };

/* Column flags: where a column is not shown. */
enum { LOOM__CF_NOTEXT = 1, LOOM__CF_NOHTML = 2, LOOM__CF_NOJSON = 4, LOOM__CF_JSON_ONLY = 3 };

/* Column lists give only the fields that differ from 0 (flags, decimals),
 * so that a section's columns read as one line each. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct loom__col {
  const char *key;   /* JSON key; dots nest ("launch_latency.p50_ns") */
  const char *title; /* text and HTML header; child rows match columns by it */
  int type;          /* LOOM__COL_* */
  int flags;         /* LOOM__CF_* */
  int prec;          /* text/HTML decimals; 0: 3 (PCT: 2) */
  int jprec;         /* JSON decimals of PCT/NUM; 0: as many as it takes */
} loom__col;

enum { LOOM__CELL_INT, LOOM__CELL_REAL, LOOM__CELL_STR, LOOM__CELL_NULL, LOOM__CELL_INTS };
typedef struct loom__cell {
  int kind;          /* LOOM__CELL_* (NULL: no value; JSON null, text "-") */
  int64_t i;
  double d;          /* the value as a real (also for INT cells) */
  char *s;
  int64_t *v;        /* INTS */
  size_t nv;
} loom__cell;

/* Table flags. */
enum {
  LOOM__TF_NOTEXT = 1, LOOM__TF_NOHTML = 2, LOOM__TF_NOJSON = 4,
  LOOM__TF_RECORD = 8,     /* one row of figures: JSON keys at the path, text "name value" lines */
  LOOM__TF_FULL = 16,      /* JSON: the whole table {title, columns, row_count, rows, notes} */
  LOOM__TF_MAP = 32,       /* JSON: {"<column 0>": column 1, ...} */
  LOOM__TF_OWN_COUNT = 64, /* the title says how many rows are shown */
  LOOM__TF_ALL = 128       /* never limited to the report's top N */
};
enum {
  LOOM__CHART_NONE,
  LOOM__CHART_BARS,
  LOOM__CHART_TIMELINE,
  LOOM__CHART_HEAT,
  LOOM__CHART_FLAME,
  LOOM__CHART_LEVELS
};

typedef struct loom__table {
  const char *key;
  char *title;
  const loom__col *cols;
  size_t ncols;
  loom__cell *cells;  /* row-major */
  size_t ncells, cap;
  size_t more;            /* rows past the report's top N: counted, not made */
  char **notes;
  size_t nnotes, cap_notes;
  int oom;
  /* how it is rendered */
  int flags;              /* LOOM__TF_* */
  const char *path;       /* JSON place ("devices", "host.ops.top"; "" the root) */
  const char *count_at;   /* JSON key given the row count ("host.ops.names"), or NULL */
  size_t text_max;        /* text shows at most this many rows (0: no such limit) */
  int chart;              /* LOOM__CHART_*, drawn on the HTML page */
  unsigned chart_cols;    /* bit mask of the columns the chart draws */
  /* rows of a child table belong to rows of this one (queues of a device):
   * JSON nests them under child_key, text and HTML list them below it */
  struct loom__table *child;
  const char *child_key;
  size_t *parent;         /* child: its rows' parent rows */
  size_t nparent, cap_parent;
} loom__table;

/* cols must outlive the table (static arrays). */
loom__table *loom__table_new(const char *key, const char *title, const loom__col *cols,
                             size_t ncols);
void loom__table_free(loom__table *t);
void loom__table_retitle(loom__table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Cells are appended in row order: one per column per row. */
void loom__table_str(loom__table *t, const char *s);
void loom__table_int(loom__table *t, int64_t v);
void loom__table_real(loom__table *t, double v);
void loom__table_pct(loom__table *t, double v);
void loom__table_null(loom__table *t);
void loom__table_num(loom__table *t, double v);
void loom__table_ints(loom__table *t, const int64_t *v, size_t n);
void loom__table_note(loom__table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t loom__table_rows(const loom__table *t);
/* Rows made plus rows only counted (t->more). */
size_t loom__table_count(const loom__table *t);
/* A child table (freed with t); call loom__table_parent before each of its rows. */
loom__table *loom__table_child(loom__table *t, const char *key, const loom__col *cols,
                               size_t ncols);
void loom__table_parent(loom__table *child, size_t parent_row);
const loom__cell *loom__table_at(const loom__table *t, size_t row, size_t col);
/* A cell as text and HTML show it (no unit), into buf. */
const char *loom__cell_text(const loom__col *c, const loom__cell *v, char *buf, size_t cap);
/* A column header with its unit ("time (us)"). */
const char *loom__col_header(const loom__col *c, char *buf, size_t cap);

/* A report: its tables in order (the order of the text, HTML and JSON). */
typedef struct loom__model {
  loom__table **t;
  size_t n, cap;
  size_t top;             /* rows per table, 0 = all */
  char title[512];        /* the text's first line, the page's heading */
  int oom;
} loom__model;

/* Makes a table and appends it at JSON path; NULL when out of memory (the
 * model remembers). */
loom__table *loom__model_add(loom__model *m, const char *path, const char *title,
                             const loom__col *cols, size_t ncols, int flags);
/* Appends a table made elsewhere (owned by the model from now on). */
void loom__model_put(loom__model *m, loom__table *t, const char *path, int flags);
void loom__model_free(loom__model *m);
/* How many of n rows a builder makes for t: the report's top N unless t
 * shows all (the rest are counted in t->more, so a trace of a million
 * names does not make a million rows to print twenty). */
size_t loom__model_limit(const loom__model *m, loom__table *t, size_t n);
/* Rows a renderer shows of t (JSON: text_max does not apply). */
size_t loom__table_shown(const loom__model *m, const loom__table *t, int text);

struct loom__out;
void loom__model_text(const loom__model *m, struct loom__out *o);
void loom__model_json(const loom__model *m, struct loom__out *o);
void loom__model_html(const loom__model *m, struct loom__out *o);
/* One table on its own (table_text.c, table_json.c, table_html.c). */
void loom__table_text(const loom__table *t, struct loom__out *o, size_t rows);
void loom__table_json(const loom__table *t, struct loom__out *o, size_t rows);
void loom__table_html(const loom__table *t, struct loom__out *o, size_t rows);
/* The page's charts of a table (table_chart.c). */
void loom__table_chart(const loom__table *t, struct loom__out *o, size_t rows);
/* FLAME: rows (depth, start, samples, share, function) as a flame graph (table_flame.c). */
void loom__table_flame(const loom__table *t, struct loom__out *o, size_t rows);
/* HTML text with &, <, >, " escaped; at most max bytes, then an ellipsis. */
void loom__html_esc(struct loom__out *o, const char *s, size_t max);

#endif

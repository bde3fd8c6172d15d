/*
 * report_model.h - the sections of `loom report`, each built once as tables
 * of the report model (table.h) that the text, JSON and HTML renderers
 * print; in the order of the report (and of its JSON document).
 */
#ifndef LOOM_REPORT_MODEL_H
#define LOOM_REPORT_MODEL_H

#include "table.h"

/* analysis.h's guard does not cover its report model: these are its types,
 * declared here so that this header can be included after it. */
struct loom__report;
struct loom__qs;

/* The whole report for top rows per table (0: all). */
void loom__report_model(const struct loom__report *r, size_t top, loom__model *m);

void loom__report_input(const struct loom__report *r, loom__model *m);   /* report_tables.c */
void loom__report_devices(const struct loom__report *r, loom__model *m);
void loom__report_kernels(const struct loom__report *r, loom__model *m);
void loom__report_moves(const struct loom__report *r, loom__model *m);
void loom__report_host(const struct loom__report *r, loom__model *m);    /* report_sections.c */
void loom__report_steps(const struct loom__report *r, loom__model *m);
void loom__report_memory(const struct loom__report *r, loom__model *m); /* report_memory.c */
void loom__report_cpu(const struct loom__report *r, loom__model *m);    /* report_cpu.c */
void loom__report_hta(const struct loom__report *r, loom__model *m);
void loom__report_ranks(const struct loom__report *r, loom__model *m);   /* report_ranks.c */
void loom__report_critpath(const struct loom__report *r, loom__model *m); /* report_critpath.c */
void loom__report_unknown(const struct loom__report *r, loom__model *m); /* report_sections.c */

/* count, mean, p50, p95, min, max, exact: the cells of a DIST. */
void loom__report_dist(loom__table *t, const struct loom__qs *q);

#endif

/*
 * mapsnap.h - loom record's snapshots of its processes' file mappings, for
 * the salvager (mapsnap.c).
 */
#ifndef LOOM_MAPSNAP_H
#define LOOM_MAPSNAP_H
/* Starts the thread that writes <pid>.maps beside every <pid>.arena in the
 * folder arenas whose mappings changed, twice a second. */
void loom__mapsnap_start(const char *arenas);
/* Stops it (before the salvage reads the snapshots). */
void loom__mapsnap_stop(void);
#endif

/*
 * cli.h - what the commands of `loom` share: libloom's private table
 * (loom/tools.h), the command's only way to the library's insides.
 */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include "loom/tools.h"

/* The table, checked against this command's build once.  When the library
 * comes from another build, says so on stderr (both versions, what to do)
 * and exits with status 1: never a call through a table of another shape. */
const loom_tools *cli_tools(void);

#endif

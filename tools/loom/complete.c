/*
 * complete.c - the bash completion of loom, rendered from the commands'
 * description (spec.c): the commands, each command's options, and what each
 * option's value and each command's arguments are.  Device names and the
 * options backends declare come from `loom backends --no-probe`, process
 * ids from `loom trigger --list`, read at completion time from the loom
 * being completed; trace files are .json, .json.gz, .pftrace, .pftrace.gz.
 * The script needs bash alone (bash-completion's helpers are used when
 * loaded: _command_offset for record's program).
 */
#include <string.h>

#include "spec.h"

static const char *const kinds[] = {
    [CLI_V_NONE] = "", [CLI_V_TEXT] = "text", [CLI_V_TRACE] = "trace",
    [CLI_V_TRACE_OUT] = "trace", [CLI_V_FILE] = "file", [CLI_V_DIR] = "dir",
    [CLI_V_DEVICES] = "devices", [CLI_V_PLUGIN] = "plugin", [CLI_V_WORDS] = "words",
    [CLI_V_PROGRAM] = "program", [CLI_V_PID] = "pid", [CLI_V_COMMAND] = "command",
    [CLI_V_OPTION] = "option"};

/* The fixed part: how a kind of value is completed, and the walk over the
 * words before the cursor (an option's values skipped, record's program
 * found). */
static const char *const engine[] = {
    "_loom_files() { # PATTERN CUR: files matching PATTERN (empty: all) and folders",
    "  local reset",
    "  reset=$(shopt -p extglob)",
    "  shopt -s extglob",
    "  if [[ -n $1 ]]; then",
    "    mapfile -t COMPREPLY < <({ compgen -f -X \"!$1\" -- \"$2\"; compgen -d -- \"$2\"; }"
    " | sort -u)",
    "  else",
    "    mapfile -t COMPREPLY < <(compgen -f -- \"$2\")",
    "  fi",
    "  $reset",
    "  compopt -o filenames 2>/dev/null",
    "}",
    "",
    "_loom_kind() { # LOOM KIND CUR [WORDS...]: COMPREPLY for a value of this kind",
    "  local loom=$1 kind=$2 cur=$3 pre= w v",
    "  shift 3",
    "  case $kind in",
    "  trace) _loom_files '*.@(json|json.gz|pftrace|pftrace.gz)' \"$cur\" ;;",
    "  plugin) _loom_files '*.so' \"$cur\" ;;",
    "  file) _loom_files '' \"$cur\" ;;",
    "  dir)",
    "    mapfile -t COMPREPLY < <(compgen -d -- \"$cur\")",
    "    compopt -o filenames 2>/dev/null ;;",
    "  devices) # LIST: device types, comma-separated; the last one is completed",
    "    [[ $cur == *,* ]] && pre=${cur%,*},",
    "    w=$(\"$loom\" backends --no-probe 2>/dev/null |",
    "        sed -n 's/^[^ ].* device=\\([^ ]*\\).*/\\1/p' | sort -u | tr '\\n' ' ')",
    "    if [[ -n $pre ]]; then # after a comma: the types not named yet",
    "      w=\" cpu $w \"",
    "      for v in ${pre//,/ }; do w=${w// $v / }; done",
    "    else",
    "      w=\"all cpu $w\"",
    "    fi",
    "    mapfile -t COMPREPLY < <(compgen -P \"$pre\" -W \"$w\" -- \"${cur##*,}\") ;;",
    "  option) # NAME.KEY= of the options the backends declare",
    "    w=$(\"$loom\" backends --no-probe 2>/dev/null |",
    "        sed -n 's/^      \\([a-z0-9_]*\\.[a-z0-9_]*\\) .*/\\1=/p' | sort -u)",
    "    mapfile -t COMPREPLY < <(compgen -W \"$w\" -- \"$cur\")",
    "    compopt -o nospace 2>/dev/null ;;",
    "  pid)",
    "    w=$(\"$loom\" trigger --list 2>/dev/null | awk '$1 ~ /^[0-9]+$/ { print $1 }')",
    "    mapfile -t COMPREPLY < <(compgen -W \"$w\" -- \"$cur\") ;;",
    "  command) mapfile -t COMPREPLY < <(compgen -W \"$_loom_commands\" -- \"$cur\") ;;",
    "  words) mapfile -t COMPREPLY < <(compgen -W \"$*\" -- \"$cur\") ;;",
    "  program) mapfile -t COMPREPLY < <(compgen -c -- \"$cur\" | sort -u) ;;",
    "  *) COMPREPLY=() ;;",
    "  esac",
    "}",
    "",
    "_loom() {",
    "  local cur=${COMP_WORDS[COMP_CWORD]} cword=$COMP_CWORD loom=${COMP_WORDS[0]}",
    "  local cmd=${COMP_WORDS[1]} i w= v n kind prog=0",
    "  COMPREPLY=()",
    "  command -v \"$loom\" >/dev/null 2>&1 || loom=loom",
    "  if ((cword == 1)); then",
    "    mapfile -t COMPREPLY < <(compgen -W \"$_loom_commands $(_loom_options loom)\" \\",
    "                             -- \"$cur\")",
    "    return",
    "  fi",
    "  for ((i = 2; i < cword; i++)); do",
    "    w=${COMP_WORDS[i]}",
    "    if [[ $cmd == record && ($w == -- || $w != -*) ]]; then",
    "      prog=$i",
    "      [[ $w == -- ]] && prog=$((i + 1))",
    "      break",
    "    fi",
    "    [[ $w == -- ]] && break",
    "    v=$(_loom_value \"$cmd\" \"$w\")",
    "    [[ -n $v ]] || continue",
    "    read -r kind n v <<<\"$v\"",
    "    if ((i + n >= cword)); then",
    "      _loom_kind \"$loom\" \"$kind\" \"$cur\" $v",
    "      return",
    "    fi",
    "    ((i += n))",
    "  done",
    "  if ((prog > 0 && cword >= prog)); then",
    "    if ((cword > prog)) && declare -F _command_offset >/dev/null; then",
    "      _command_offset \"$prog\"",
    "    elif ((cword == prog)); then",
    "      _loom_kind \"$loom\" program \"$cur\"",
    "    else",
    "      _loom_kind \"$loom\" file \"$cur\"",
    "    fi",
    "  elif [[ $cur == -* && $w != -- ]]; then",
    "    mapfile -t COMPREPLY < <(compgen -W \"$(_loom_options \"$cmd\")\" -- \"$cur\")",
    "  else",
    "    _loom_kind \"$loom\" \"$(_loom_argument \"$cmd\")\" \"$cur\"",
    "  fi",
    "}",
    "complete -F _loom loom",
    NULL};

static void options(FILE *f) {
  fputs("\n_loom_options() { # COMMAND: its options\n  case $1 in\n", f);
  for (const cli_cmd *c = cli_commands; c->name; c++) {
    fprintf(f, "  %s) echo '", c->name);
    for (const cli_opt *o = c->opts; o && (o->name || o->help); o++)
      if (o->name) fprintf(f, "%s ", o->name);
    fputs("-h --help' ;;\n", f);
  }
  fputs("  esac\n}\n", f);
}

static void values(FILE *f) {
  fputs("\n_loom_value() { # COMMAND OPTION: KIND NVALUES [WORDS...] of a value it takes\n"
        "  case \"$1 $2\" in\n", f);
  for (const cli_cmd *c = cli_commands; c->name; c++)
    for (const cli_opt *o = c->opts; o && (o->name || o->help); o++) {
      if (!o->name || !o->arg) continue;
      fprintf(f, "  '%s %s') echo '%s %d%s%s' ;;\n", c->name, o->name, kinds[o->val],
              cli_nvalues(o), o->words ? " " : "", o->words ? o->words : "");
    }
  fputs("  esac\n}\n", f);
  fputs("\n_loom_argument() { # COMMAND: the KIND of its arguments\n  case $1 in\n", f);
  for (const cli_cmd *c = cli_commands; c->name; c++)
    if (c->args) fprintf(f, "  %s) echo %s ;;\n", c->name, kinds[c->args[0].val]);
  fputs("  esac\n}\n\n", f);
}

void cli_completion(FILE *f) {
  fputs("# bash completion for loom: commands, each command's options, device names\n"
        "# (loom backends), process ids (loom trigger --list) and trace files.\n"
        "# Made by loom-docgen from tools/loom/spec.c, as loom --help is: edit that.\n\n"
        "_loom_commands='", f);
  for (const cli_cmd *c = cli_commands + 1; c->name; c++)
    fprintf(f, "%s%s", c->name, c[1].name ? " " : "'\n");
  options(f);
  values(f);
  for (const char *const *l = engine; *l; l++) fprintf(f, "%s\n", *l);
}

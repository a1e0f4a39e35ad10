#include <valgrind/callgrind.h>
void sp_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void sp_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void sp_dump(const char *l) { CALLGRIND_DUMP_STATS_AT(l); }

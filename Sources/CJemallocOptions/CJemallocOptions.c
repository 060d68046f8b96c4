#include "CJemallocOptions.h"

// jemalloc reads this string when it starts, then MALLOC_CONF, whose options win over the same ones here.
//
// narenas:4 — jemalloc's default is four arenas per CPU the process sees: in a container that is the host's CPUs,
// not the pod's limit, and every arena keeps freed pages of its own. The worker's busy threads (the job pool, the
// consumers, the event loops, librdkafka's) share four with little contention.
// dirty_decay_ms:1000, muzzy_decay_ms:0 — freed pages go back to the system after about a second instead of ten,
// so a burst of jobs in flight does not leave its peak behind as resident memory.
//
// With these the worker's peak RSS at 10 000 jobs in flight falls from 156–166 MB to 138–143 MB
// (docs/performance.md).
const char *malloc_conf = "narenas:4,dirty_decay_ms:1000,muzzy_decay_ms:0";

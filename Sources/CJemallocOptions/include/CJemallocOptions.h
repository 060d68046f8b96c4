#pragma once

/// The options jemalloc starts with in the executables that link this target (see CJemallocOptions.c).
extern const char *malloc_conf;

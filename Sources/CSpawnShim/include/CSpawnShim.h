#ifndef PUSH_SPAWN_SHIM_H
#define PUSH_SPAWN_SHIM_H

#include <spawn.h>

// glibc declares posix_spawn_file_actions_addclosefrom_np (2.34+) only with _GNU_SOURCE, which Swift's
// Glibc module does not define.

/// Adds the action "close every descriptor from `from` up" to `actions`.
int push_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from);

#endif

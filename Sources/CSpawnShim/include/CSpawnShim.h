#ifndef IMGD_CSPAWNSHIM_H
#define IMGD_CSPAWNSHIM_H

#include <spawn.h>

/// glibc's non-portable posix_spawn file actions (glibc 2.29 and 2.34), which Swift's Glibc
/// module does not declare: it is built without _GNU_SOURCE.

/// In the child, close every descriptor from `lowest` up (posix_spawn_file_actions_addclosefrom_np).
int imgd_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int lowest);

/// In the child, change to `folder` before exec (posix_spawn_file_actions_addchdir_np).
int imgd_spawn_add_chdir(posix_spawn_file_actions_t *actions, const char *folder);

#endif

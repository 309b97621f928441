#define _GNU_SOURCE
#include "CSpawnShim.h"

int imgd_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

int imgd_spawn_add_chdir(posix_spawn_file_actions_t *actions, const char *folder) {
    return posix_spawn_file_actions_addchdir_np(actions, folder);
}

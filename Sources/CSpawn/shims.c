#define _GNU_SOURCE
#include "CSpawn.h"
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

// Foundation's Process (swift-corelibs-foundation on Linux) reads /proc/self/fd with a buffer
// over-read that crashes at random; glibc's closefrom action closes the same descriptors in the
// child without reading anything in the parent.
int CSpawn_start(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                 int in_fd, int out_fd, int err_fd, const char *directory, int new_session) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int status = posix_spawn_file_actions_init(&actions);
  if (status != 0) return status;
  status = posix_spawnattr_init(&attr);
  if (status != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return status;
  }
  const int from[3] = {in_fd, out_fd, err_fd};
  for (int target = 0; target < 3 && status == 0; target++) {
    if (from[target] >= 0 && from[target] != target)
      status = posix_spawn_file_actions_adddup2(&actions, from[target], target);
  }
  if (status == 0) status = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (status == 0 && directory != NULL) status = posix_spawn_file_actions_addchdir_np(&actions, directory);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (new_session) flags |= POSIX_SPAWN_SETSID;
  if (status == 0) status = posix_spawnattr_setflags(&attr, flags);
  if (status == 0) status = posix_spawnattr_setsigmask(&attr, &empty);
  if (status == 0) status = posix_spawnattr_setsigdefault(&attr, &all);
  if (status == 0) status = posix_spawn(pid, path, &actions, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return status;
}

int CSpawn_pidfd(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int CSpawn_pidfd_signal(int pidfd, int signal) {
  return (int)syscall(SYS_pidfd_send_signal, pidfd, signal, NULL, 0);
}

int CSpawn_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

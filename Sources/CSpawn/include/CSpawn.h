#ifndef CSPAWN_H
#define CSPAWN_H
#include <sys/types.h>

// Starts `path` with `argv` and `envp` (both NULL-terminated) by posix_spawn: the child's
// standard input, output and error are `in_fd`, `out_fd` and `err_fd` (-1: this process's own),
// every other descriptor is closed in the child whatever its close-on-exec flag, its signal mask
// is empty and every signal has its default action (a parent that ignores SIGPIPE must not pass
// that on). `directory` (NULL: this process's) is its working folder. `new_session` puts the
// child in a session of its own, out of reach of the terminal's signals. Returns 0 and sets
// *pid, or an errno.
int CSpawn_start(pid_t *pid, const char *path, char *const argv[], char *const envp[],
                 int in_fd, int out_fd, int err_fd, const char *directory, int new_session);

// A descriptor that refers to process `pid` (pidfd_open(2)): readable once it has exited, and
// never confused with a later process that reuses the number. -1 with errno where the kernel has none.
int CSpawn_pidfd(pid_t pid);

// Sends `signal` through a pidfd (pidfd_send_signal(2)). Returns 0 or -1 with errno.
int CSpawn_pidfd_signal(int pidfd, int signal);

// pipe2(fds, O_CLOEXEC): neither end leaks into a program another thread starts meanwhile.
int CSpawn_pipe(int fds[2]);

#endif

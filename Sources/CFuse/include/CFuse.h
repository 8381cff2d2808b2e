#ifndef CFUSE_H
#define CFUSE_H
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 35
#endif
#include <fuse3/fuse_lowlevel.h>
#include <sys/stat.h>

// Helpers for what Swift cannot reach directly: bitfields, macros and versioned symbols.
void CFuseShims_set_keep_cache(struct fuse_file_info *fi, int on);
int CFuseShims_fi_flags(const struct fuse_file_info *fi);
uint64_t CFuseShims_fi_fh(const struct fuse_file_info *fi);
void CFuseShims_set_fh(struct fuse_file_info *fi, uint64_t fh);

// Creates a session from argv-style options (e.g. "-o", "ro,allow_other"); NULL on failure.
// `userdata` reaches every request (fuse_req_userdata).
struct fuse_session *CFuseShims_session_new(int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata);
// The multi-threaded loop (a versioned symbol behind a macro in fuse_lowlevel.h).
int CFuseShims_loop_mt(struct fuse_session *se, unsigned int max_idle_threads);
// Asks the kernel for large reads and async reads in init.
int CFuseShims_reply_fd(fuse_req_t req, int fd, off_t offset, size_t size);
void CFuseShims_tune_connection(struct fuse_conn_info *conn);
#endif

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
void CFuseShims_tune_connection(struct fuse_conn_info *conn);

// Passthrough (kernel 6.9+), which libfuse 3.14 does not know: the session's requests and
// replies go through hooks that add it to INIT and OPEN replies (shims.c says how).
// After fuse_session_mount: 0, or a negative errno.
int CFuseShims_watch_channel(struct fuse_session *se);
// In init: asks for passthrough when the kernel offered it, with backing files as deep as
// `stack_depth` (1: on a plain filesystem; 2: on one stacked once, such as overlayfs); 1 when it
// will be on.
int CFuseShims_take_passthrough(uint32_t stack_depth);
// In init: 1 when the kernel lets a program map a direct I/O open shared (Linux 6.6,
// FUSE_DIRECT_IO_ALLOW_MMAP), which the INIT reply then takes.
int CFuseShims_maps_direct_io(void);
// The depth to ask for backing files in `folder`: 2 on overlayfs, else 1 (asking 2 everywhere
// would keep an overlayfs from being stacked on top of the mount).
uint32_t CFuseShims_backing_stack_depth(const char *folder);
// fuse_reply_open/create; with backing_id > 0 the reply opens the file by passthrough.
int CFuseShims_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int32_t backing_id);
int CFuseShims_reply_create(fuse_req_t req, const struct fuse_entry_param *e, const struct fuse_file_info *fi, int32_t backing_id);
// FUSE_DEV_IOC_BACKING_OPEN/CLOSE on the session's descriptor: an id (> 0), or a negative errno.
int32_t CFuseShims_backing_open(int session_fd, int fd);
int CFuseShims_backing_close(int session_fd, int32_t backing_id);
void CFuseShims_set_direct_io(struct fuse_file_info *fi, int on);
#endif

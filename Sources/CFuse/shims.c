#include <stddef.h>
#include "CFuse.h"

void CFuseShims_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }
int CFuseShims_fi_flags(const struct fuse_file_info *fi) { return fi->flags; }
uint64_t CFuseShims_fi_fh(const struct fuse_file_info *fi) { return fi->fh; }
void CFuseShims_set_fh(struct fuse_file_info *fi, uint64_t fh) { fi->fh = fh; }

struct fuse_session *CFuseShims_session_new(int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct fuse_session *se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
  fuse_opt_free_args(&args);
  return se;
}

int CFuseShims_loop_mt(struct fuse_session *se, unsigned int max_idle_threads) {
  struct fuse_loop_config config;
  config.clone_fd = 0;
  config.max_idle_threads = max_idle_threads;
  return fuse_session_loop_mt(se, &config);
}

int CFuseShims_reply_fd(fuse_req_t req, int fd, off_t offset, size_t size) {
  struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
  buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
  buf.buf[0].fd = fd;
  buf.buf[0].pos = offset;
  return fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

void CFuseShims_tune_connection(struct fuse_conn_info *conn) {
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  // Replies from staged files go from the page cache to the kernel by splice, not through us.
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  // Larger requests mean fewer round trips through the kernel: max_write also sets max_pages,
  // which bounds the size of read requests (1 MiB instead of 128 KiB).
  conn->max_write = 1024 * 1024;
  conn->max_readahead = 1024 * 1024;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
}

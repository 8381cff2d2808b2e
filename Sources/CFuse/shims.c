#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <sys/uio.h>
#include <unistd.h>
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

void CFuseShims_tune_connection(struct fuse_conn_info *conn) {
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  // Every read of a cached file asks for attributes the kernel was told to forget, and a new
  // size or mtime in them drops the file's pages: the daemon never drops pages itself
  // (forgetKernelCache in BucketFS). libfuse wants it by default; said here, since it is relied on.
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  // Larger requests mean fewer round trips through the kernel: max_write also sets max_pages,
  // which bounds the size of read requests (1 MiB instead of 128 KiB).
  conn->max_write = 1024 * 1024;
  conn->max_readahead = 1024 * 1024;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
}

// MARK: passthrough
//
// libfuse 3.14 knows nothing of FUSE passthrough (kernel 6.9, protocol 7.40), but it lets the
// daemon see every request and reply on /dev/fuse (fuse_session_custom_io). The two replies
// that must say more than libfuse writes are patched on their way out: INIT (the passthrough
// flag and a stack depth) and OPEN/CREATE (FOPEN_PASSTHROUGH and the backing id). libfuse
// builds and sends a reply on the thread that calls fuse_reply_*, and reads a request and calls
// its handler on one thread, so what to patch is handed over in thread-local variables: no
// table of requests, no lock.

// Bits and layouts of protocol 7.40 that Debian 12's <linux/fuse.h> (7.38) does not have.
#define CFUSE_INIT_EXT (1u << 30)
#define CFUSE_INIT2_PASSTHROUGH (1u << 5)  // FUSE_PASSTHROUGH: bit 37 of the 64-bit flags
#define CFUSE_INIT2_DIRECT_IO_ALLOW_MMAP (1u << 4)  // bit 36 (Linux 6.6)
#define CFUSE_HANDLE_KILLPRIV_V2 (1u << 28)
#define CFUSE_FOPEN_DIRECT_IO (1u << 0)
#define CFUSE_FOPEN_NOFLUSH (1u << 5)
#define CFUSE_FOPEN_PARALLEL_DIRECT_WRITES (1u << 6)
#define CFUSE_FOPEN_PASSTHROUGH (1u << 7)
// What the kernel accepts beside FOPEN_PASSTHROUGH (fs/fuse/iomode.c); keep_cache is not.
#define CFUSE_FOPEN_PASSTHROUGH_MASK \
  (CFUSE_FOPEN_PASSTHROUGH | CFUSE_FOPEN_DIRECT_IO | CFUSE_FOPEN_PARALLEL_DIRECT_WRITES | CFUSE_FOPEN_NOFLUSH)

struct cfuse_backing_map {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
#define CFUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct cfuse_backing_map)
#define CFUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

// The request header and the start of INIT's argument, as the kernel sends them.
struct cfuse_in_header {
  uint32_t len, opcode;
  uint64_t unique, nodeid;
  uint32_t uid, gid, pid;
  uint16_t total_extlen, padding;
};
struct cfuse_init_in_start {
  uint32_t major, minor, max_readahead, flags, flags2;
};
struct cfuse_out_header {
  uint32_t len;
  int32_t error;
  uint64_t unique;
};

static __thread int init_offers_passthrough;  // set by the read of an INIT request
static __thread int init_offers_killpriv_v2;   // likewise
static __thread int init_offers_direct_io_mmap;  // likewise
static __thread uint64_t init_unique;          // the INIT request being answered on this thread
static __thread uint32_t init_reply_passthrough;  // the stack depth, set when init takes the offer
static __thread int32_t open_reply_backing;    // set around fuse_reply_open/create

static ssize_t channel_read(int fd, void *buf, size_t len, void *userdata) {
  (void)userdata;
  ssize_t n = read(fd, buf, len);
  if (n >= (ssize_t)(sizeof(struct cfuse_in_header) + sizeof(struct cfuse_init_in_start))) {
    const struct cfuse_in_header *h = buf;
    if (h->opcode == 26) {  // FUSE_INIT
      const struct cfuse_init_in_start *in = (const void *)((const char *)buf + sizeof(*h));
      init_offers_passthrough = (in->flags & CFUSE_INIT_EXT) && (in->flags2 & CFUSE_INIT2_PASSTHROUGH);
      init_offers_killpriv_v2 = (in->flags & CFUSE_HANDLE_KILLPRIV_V2) != 0;
      init_offers_direct_io_mmap = (in->flags & CFUSE_INIT_EXT) && (in->flags2 & CFUSE_INIT2_DIRECT_IO_ALLOW_MMAP);
      init_unique = h->unique;
    }
  }
  return n;
}

static int reply_ok(struct iovec *iov, int count, size_t least) {
  if (count < 2 || iov[0].iov_len < sizeof(struct cfuse_out_header) || iov[1].iov_len < least) return 0;
  return ((const struct cfuse_out_header *)iov[0].iov_base)->error == 0;
}

static int is_init_reply(struct iovec *iov, int count) {
  return init_unique != 0 && count >= 1 && iov[0].iov_len >= sizeof(struct cfuse_out_header) &&
         ((const struct cfuse_out_header *)iov[0].iov_base)->unique == init_unique;
}

static ssize_t channel_writev(int fd, struct iovec *iov, int count, void *userdata) {
  (void)userdata;
  if (is_init_reply(iov, count)) {
    uint32_t depth = init_reply_passthrough;
    init_reply_passthrough = 0;
    init_unique = 0;
    // fuse_init_out: flags at 12, flags2 at 32, max_stack_depth at 36.
    if (reply_ok(iov, count, 40)) {
      char *out = iov[1].iov_base;
      uint32_t flags, flags2;
      memcpy(&flags, out + 12, 4);
      memcpy(&flags2, out + 32, 4);
      // A file here never has a set-id bit (chmod refuses them) nor security.capability
      // (only user.* can be set), so there is nothing for the daemon to kill on a write, a
      // truncate or a chown; taking this spares a GETXATTR of security.capability before
      // every write and a GETATTR before every chown (fs/fuse: SB_NOSEC).
      if (init_offers_killpriv_v2) flags |= CFUSE_HANDLE_KILLPRIV_V2;
      // Opens that read beside an appender's direct writes bypass the page cache too (their
      // pages would be read short while the writes size the inode): a program may still map
      // them shared, as it may any other file.
      if (init_offers_direct_io_mmap) {
        flags |= CFUSE_INIT_EXT;
        flags2 |= CFUSE_INIT2_DIRECT_IO_ALLOW_MMAP;
      }
      if (depth) {
        flags |= CFUSE_INIT_EXT;
        flags2 |= CFUSE_INIT2_PASSTHROUGH;
        memcpy(out + 36, &depth, 4);
      }
      memcpy(out + 12, &flags, 4);
      memcpy(out + 32, &flags2, 4);
    }
  } else if (open_reply_backing > 0 && reply_ok(iov, count, 16)) {
    // fuse_open_out ends the argument (OPEN: alone; CREATE: after fuse_entry_out):
    // fh, open_flags, backing_id.
    char *open_out = (char *)iov[1].iov_base + iov[1].iov_len - 16;
    uint32_t flags;
    memcpy(&flags, open_out + 8, 4);
    flags = (flags | CFUSE_FOPEN_PASSTHROUGH) & CFUSE_FOPEN_PASSTHROUGH_MASK;
    memcpy(open_out + 8, &flags, 4);
    memcpy(open_out + 12, &open_reply_backing, 4);
  }
  return writev(fd, iov, count);
}

int CFuseShims_watch_channel(struct fuse_session *se) {
  static const struct fuse_custom_io io = {
    .writev = channel_writev,
    .read = channel_read,
    // Replies are written from memory (fuse_reply_buf, fuse_reply_iov), never spliced.
    .splice_receive = NULL,
    .splice_send = NULL,
  };
  return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

int CFuseShims_maps_direct_io(void) { return init_offers_direct_io_mmap; }

int CFuseShims_take_passthrough(uint32_t stack_depth) {
  if (!init_offers_passthrough || stack_depth < 1 || stack_depth > 2) return 0;
  init_reply_passthrough = stack_depth;
  return 1;
}

int CFuseShims_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int32_t backing_id) {
  open_reply_backing = backing_id;
  int result = fuse_reply_open(req, fi);
  open_reply_backing = 0;
  return result;
}

int CFuseShims_reply_create(fuse_req_t req, const struct fuse_entry_param *e, const struct fuse_file_info *fi, int32_t backing_id) {
  open_reply_backing = backing_id;
  int result = fuse_reply_create(req, e, fi);
  open_reply_backing = 0;
  return result;
}

int32_t CFuseShims_backing_open(int session_fd, int fd) {
  struct cfuse_backing_map map = {.fd = fd, .flags = 0, .padding = 0};
  int id = ioctl(session_fd, CFUSE_DEV_IOC_BACKING_OPEN, &map);
  return id < 0 ? -errno : id;
}

int CFuseShims_backing_close(int session_fd, int32_t backing_id) {
  uint32_t id = (uint32_t)backing_id;
  return ioctl(session_fd, CFUSE_DEV_IOC_BACKING_CLOSE, &id) < 0 ? -errno : 0;
}

void CFuseShims_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }

uint32_t CFuseShims_backing_stack_depth(const char *folder) {
  struct statfs fs;
  // OVERLAYFS_SUPER_MAGIC: a container's disk, itself stacked once.
  return statfs(folder, &fs) == 0 && fs.f_type == 0x794c7630 ? 2 : 1;
}

// The fastest a FUSE read that is not passthrough can be on this machine: a file system of one
// file whose READs are answered from memory, with no network, no disk and no checksum, and the
// same request sizes bucketfs asks the kernel for (1 MiB reads and read-ahead). The bench reads
// it beside the mount's cold read: a cold read cannot beat it, whatever the daemon does. Given
// COPY_PATH, every read's bytes are also written there at their offset, through the page cache,
// as a staged copy is: the floor of a cold read that stages.
//   fuse-floor SIZE_BYTES MOUNTPOINT [COPY_PATH]   (runs in the foreground until unmounted)
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t size;
static char *bytes;
static int copy = -1;

static void floor_init(void *userdata, struct fuse_conn_info *conn) {
  (void)userdata;
  conn->max_write = 1 << 20;  // also sets max_pages, as bucketfs does
  conn->max_readahead = 1 << 20;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
}

static void attributes(fuse_ino_t ino, struct stat *st) {
  memset(st, 0, sizeof *st);
  st->st_ino = ino;
  if (ino == FUSE_ROOT_ID) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
  } else {
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = (off_t)size;
  }
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi;
  struct stat st;
  attributes(ino, &st);
  fuse_reply_attr(req, &st, 60.0);
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  if (parent != FUSE_ROOT_ID || strcmp(name, "big.bin") != 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  e.ino = 2;
  e.attr_timeout = e.entry_timeout = 60.0;
  attributes(e.ino, &e.attr);
  fuse_reply_entry(req, &e);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino;
  fuse_reply_open(req, fi);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t count, off_t offset, struct fuse_file_info *fi) {
  (void)ino;
  (void)fi;
  if ((size_t)offset >= size) {
    fuse_reply_buf(req, NULL, 0);
    return;
  }
  if (count > size - (size_t)offset) count = size - (size_t)offset;
  if (copy >= 0 && pwrite(copy, bytes + offset, count, offset) != (ssize_t)count) {
    fuse_reply_err(req, EIO);
    return;
  }
  fuse_reply_buf(req, bytes + offset, count);
}

static const struct fuse_lowlevel_ops operations = {
    .init = floor_init, .lookup = floor_lookup, .getattr = floor_getattr, .open = floor_open, .read = floor_read};

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: fuse-floor SIZE_BYTES MOUNTPOINT [COPY_PATH]\n");
    return 2;
  }
  size = strtoull(argv[1], NULL, 10);
  if (argc == 4) {
    copy = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (copy < 0 || ftruncate(copy, (off_t)size) != 0) return 1;
  }
  bytes = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (bytes == MAP_FAILED) return 1;
  // Every page its own: untouched pages would all be the one zero page, always in the CPU cache.
  for (size_t i = 0; i < size; i += 4096) memset(bytes + i, (int)(i >> 12), i + 4096 <= size ? 4096 : size - i);
  char *fuse_argv[] = {argv[0], "-o", "fsname=fuse-floor"};
  struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
  struct fuse_session *session = fuse_session_new(&args, &operations, sizeof operations, NULL);
  if (session == NULL || fuse_session_mount(session, argv[2]) != 0) return 1;
  struct fuse_loop_config *config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(config, 10);
  int result = fuse_session_loop_mt(session, config);
  fuse_loop_cfg_destroy(config);
  fuse_session_unmount(session);
  fuse_session_destroy(session);
  return result == 0 ? 0 : 1;
}

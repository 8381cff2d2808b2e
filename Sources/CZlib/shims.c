#include "CZlib.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

// One inflate over the input; a member that ends is followed by the next (gzip -c a b > ab).
typedef int (*czlib_source)(void *context, const uint8_t **bytes, size_t *length);
typedef int (*czlib_sink)(void *context, const uint8_t *bytes, size_t length);

static int czlib_run(czlib_source source, void *in, czlib_sink sink, void *out) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return CZLIB_BAD_DATA;
  uint8_t buffer[1 << 16];
  int status = 0, ended = 0, any = 0;
  for (;;) {
    if (z.avail_in == 0) {
      const uint8_t *bytes = NULL;
      size_t length = 0;
      if (source(in, &bytes, &length) != 0) { status = CZLIB_IO; break; }
      if (length == 0) { status = (ended && any) ? 0 : CZLIB_BAD_DATA; break; }
      z.next_in = (Bytef *)bytes;
      z.avail_in = (uInt)length;
    }
    z.next_out = buffer;
    z.avail_out = sizeof buffer;
    int r = inflate(&z, Z_NO_FLUSH);
    size_t produced = sizeof buffer - z.avail_out;
    if (produced > 0 && sink(out, buffer, produced) != 0) { status = CZLIB_IO; break; }
    if (r == Z_STREAM_END) {
      ended = 1;
      any = 1;
      if (inflateReset(&z) != Z_OK) { status = CZLIB_BAD_DATA; break; }
      continue;
    }
    if (r == Z_BUF_ERROR && z.avail_in == 0) continue;
    if (r != Z_OK) { status = CZLIB_BAD_DATA; break; }
    ended = 0;
  }
  inflateEnd(&z);
  return status;
}

struct czlib_fd { int fd; uint8_t buffer[1 << 16]; };

static int czlib_fd_source(void *context, const uint8_t **bytes, size_t *length) {
  struct czlib_fd *f = context;
  ssize_t n;
  do { n = read(f->fd, f->buffer, sizeof f->buffer); } while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  *bytes = f->buffer;
  *length = (size_t)n;
  return 0;
}

static int czlib_fd_sink(void *context, const uint8_t *bytes, size_t length) {
  int fd = *(int *)context;
  while (length > 0) {
    ssize_t n = write(fd, bytes, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    bytes += n;
    length -= (size_t)n;
  }
  return 0;
}

int CZlib_gunzip_fd(int in_fd, int out_fd) {
  struct czlib_fd *in = malloc(sizeof *in);
  if (!in) return CZLIB_IO;
  in->fd = in_fd;
  int status = czlib_run(czlib_fd_source, in, czlib_fd_sink, &out_fd);
  free(in);
  return status;
}

struct czlib_memory_in { const uint8_t *bytes; size_t length; };
struct czlib_memory_out { uint8_t *bytes; size_t length, capacity; };

static int czlib_memory_source(void *context, const uint8_t **bytes, size_t *length) {
  struct czlib_memory_in *m = context;
  *bytes = m->bytes;
  *length = m->length;
  m->length = 0;
  return 0;
}

static int czlib_memory_sink(void *context, const uint8_t *bytes, size_t length) {
  struct czlib_memory_out *m = context;
  if (m->length + length > m->capacity) {
    size_t capacity = m->capacity ? m->capacity : 1 << 16;
    while (capacity < m->length + length) capacity *= 2;
    uint8_t *grown = realloc(m->bytes, capacity);
    if (!grown) return -1;
    m->bytes = grown;
    m->capacity = capacity;
  }
  memcpy(m->bytes + m->length, bytes, length);
  m->length += length;
  return 0;
}

int CZlib_gunzip(const uint8_t *in, size_t in_length, uint8_t **out, size_t *out_length) {
  struct czlib_memory_in source = { in, in_length };
  struct czlib_memory_out sink = { NULL, 0, 0 };
  int status = czlib_run(czlib_memory_source, &source, czlib_memory_sink, &sink);
  if (status != 0) { free(sink.bytes); return status; }
  *out = sink.bytes;
  *out_length = sink.length;
  return 0;
}

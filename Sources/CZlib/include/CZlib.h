#ifndef CZLIB_H
#define CZLIB_H
#include <stddef.h>
#include <stdint.h>

// Decompresses a gzip stream (RFC 1952, members concatenated as gzip(1) writes them) from
// in_fd to out_fd. Returns 0, CZLIB_BAD_DATA for bytes that are not gzip, CZLIB_IO for a failed
// read or write (errno says which).
#define CZLIB_BAD_DATA -1
#define CZLIB_IO -2
int CZlib_gunzip_fd(int in_fd, int out_fd);

// The same for bytes in memory: *out is malloc'd (free it), *out_length its length.
int CZlib_gunzip(const uint8_t *in, size_t in_length, uint8_t **out, size_t *out_length);

#endif

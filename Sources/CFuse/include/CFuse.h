#ifndef CFUSE_H
#define CFUSE_H
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 35
#endif
#include <fuse_lowlevel.h>
#include <sys/stat.h>

// Helpers for what Swift cannot reach directly: fields behind bitfields and macros.
void CFuseShims_set_direct_io(struct fuse_file_info *fi, int on);
void CFuseShims_set_keep_cache(struct fuse_file_info *fi, int on);
int CFuseShims_fi_flags(const struct fuse_file_info *fi);
uint64_t CFuseShims_fi_fh(const struct fuse_file_info *fi);
void CFuseShims_set_fh(struct fuse_file_info *fi, uint64_t fh);
#endif

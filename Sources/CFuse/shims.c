#include "CFuse.h"

void CFuseShims_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }
void CFuseShims_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }
int CFuseShims_fi_flags(const struct fuse_file_info *fi) { return fi->flags; }
uint64_t CFuseShims_fi_fh(const struct fuse_file_info *fi) { return fi->fh; }
void CFuseShims_set_fh(struct fuse_file_info *fi, uint64_t fh) { fi->fh = fh; }

#define _GNU_SOURCE
#include <sys/uio.h>
#include <errno.h>
#include "CCurl.h"

CURLcode CCurlShims_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode CCurlShims_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode CCurlShims_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
CURLcode CCurlShims_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
CURLcode CCurlShims_setopt_callback(CURL *h, CURLoption o, CCurlShims_data_callback cb) {
  return curl_easy_setopt(h, o, cb);
}
CURLcode CCurlShims_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
CURLMcode CCurlShims_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
size_t CCurlShims_readfunc_abort(void) { return CURL_READFUNC_ABORT; }
size_t CCurlShims_readfunc_pause(void) { return CURL_READFUNC_PAUSE; }

ssize_t CCurlShims_pread_nowait(int fd, void *buffer, size_t count, off_t offset) {
#ifdef RWF_NOWAIT
  struct iovec vector = {buffer, count};
  return preadv2(fd, &vector, 1, offset, RWF_NOWAIT);
#else
  errno = EOPNOTSUPP;
  return -1;
#endif
}

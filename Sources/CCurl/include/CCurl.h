#ifndef CCURL_H
#define CCURL_H
#include <curl/curl.h>

// curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic; Swift cannot call them.
CURLcode CCurlShims_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode CCurlShims_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode CCurlShims_setopt_ptr(CURL *handle, CURLoption option, void *value);
CURLcode CCurlShims_setopt_string(CURL *handle, CURLoption option, const char *value);
typedef size_t (*CCurlShims_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
CURLcode CCurlShims_setopt_callback(CURL *handle, CURLoption option, CCurlShims_data_callback cb);
CURLcode CCurlShims_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLMcode CCurlShims_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

// CURL_READFUNC_ABORT is a macro.
size_t CCurlShims_readfunc_abort(void);
size_t CCurlShims_readfunc_pause(void);

// An upload's bytes for the transfer thread, which must not wait for a disk: preadv2 with
// RWF_NOWAIT reads what the page cache holds and fails with EAGAIN for the rest (and with
// EOPNOTSUPP where the kernel or file system cannot tell).
#include <sys/types.h>
ssize_t CCurlShims_pread_nowait(int fd, void *buffer, size_t count, off_t offset);
#endif

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
typedef int (*CCurlShims_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                            curl_off_t ultotal, curl_off_t ulnow);
CURLcode CCurlShims_setopt_xferinfo(CURL *handle, CCurlShims_xferinfo_callback cb);
CURLcode CCurlShims_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode CCurlShims_getinfo_ptr(CURL *handle, CURLINFO info, void **value);
CURLMcode CCurlShims_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

// CURLPAUSE_CONT and CURL_WRITEFUNC_PAUSE are macros.
int CCurlShims_pause_continue(CURL *handle);
size_t CCurlShims_writefunc_pause(void);
size_t CCurlShims_readfunc_pause(void);
size_t CCurlShims_readfunc_abort(void);
#endif

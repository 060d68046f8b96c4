#ifndef PUSH_CURL_SHIM_H
#define PUSH_CURL_SHIM_H

#include <curl/curl.h>

// Typed wrappers for libcurl's variadic setters, which Swift cannot call.

typedef size_t (*push_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);

CURLcode push_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode push_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode push_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode push_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode push_curl_easy_setopt_data_callback(CURL *handle, CURLoption option, push_curl_data_callback value);
CURLcode push_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLMcode push_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// The easy handle and result of a finished transfer, if `message` is one.
int push_curl_message_done(CURLMsg *message, CURL **handle, CURLcode *result);

#endif

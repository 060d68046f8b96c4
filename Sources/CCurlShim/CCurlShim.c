#include "CCurlShim.h"

CURLcode push_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode push_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode push_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode push_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode push_curl_easy_setopt_data_callback(CURL *handle, CURLoption option, push_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
CURLcode push_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
CURLMcode push_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
int push_curl_message_done(CURLMsg *message, CURL **handle, CURLcode *result) {
    if (message->msg != CURLMSG_DONE) return 0;
    *handle = message->easy_handle;
    *result = message->data.result;
    return 1;
}

// Typed, non-variadic wrappers for libcurl's variadic entry points.
//
// Swift cannot call C variadic functions, so every `curl_easy_setopt`, `curl_easy_getinfo`,
// `curl_multi_setopt` and `curl_share_setopt` call the Swift code makes goes through one of
// these, chosen by the type of the option's argument. Nothing else lives here: policy is in Swift.
#ifndef IMGD_CCURLSHIM_H
#define IMGD_CCURLSHIM_H

#include <curl/curl.h>

/// The callback types imgd installs, spelled once so Swift sees them as named types.
typedef size_t (*imgd_curl_write_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef curl_socket_t (*imgd_curl_opensocket_callback)(void *clientp, curlsocktype purpose,
                                                       struct curl_sockaddr *address);
typedef int (*imgd_curl_prereq_callback)(void *clientp, char *conn_primary_ip, char *conn_local_ip,
                                         int conn_primary_port, int conn_local_port);

static inline CURLcode imgd_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_share(CURL *handle, CURLoption option, CURLSH *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_write_callback(CURL *handle, CURLoption option,
                                                       imgd_curl_write_callback value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode imgd_easy_setopt_opensocket_callback(CURL *handle, CURLoption option,
                                                            imgd_curl_opensocket_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode imgd_easy_setopt_prereq_callback(CURL *handle, CURLoption option,
                                                        imgd_curl_prereq_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode imgd_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode imgd_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode imgd_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode imgd_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLSHcode imgd_share_setopt_long(CURLSH *handle, CURLSHoption option, long value) {
    return curl_share_setopt(handle, option, value);
}

static inline CURLMcode imgd_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

/// The `CURLMsg` union member Swift cannot name directly.
static inline CURLcode imgd_msg_result(const CURLMsg *message) {
    return message->data.result;
}

/// Returns 1 when `address` (what libcurl hands CURLOPT_OPENSOCKETFUNCTION) is IPv4 or IPv6,
/// writing its 16-byte IPv6 form (IPv4 mapped as ::ffff:a.b.c.d) to `out16`; 0 otherwise.
int imgd_curl_sockaddr_to_ipv6(const struct curl_sockaddr *address, unsigned char *out16);

/// Opens the socket libcurl asked for (close-on-exec), or returns CURL_SOCKET_BAD with errno set.
curl_socket_t imgd_curl_open_socket(const struct curl_sockaddr *address);

#endif

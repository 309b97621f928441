#include "CCurlShim.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int imgd_curl_sockaddr_to_ipv6(const struct curl_sockaddr *address, unsigned char *out16) {
    if (address == NULL) return 0;
    const struct sockaddr *sa = &address->addr;
    if (address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        memset(out16, 0, 10);
        out16[10] = 0xff;
        out16[11] = 0xff;
        memcpy(out16 + 12, &v4->sin_addr.s_addr, 4);
        return 1;
    }
    if (address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        memcpy(out16, v6->sin6_addr.s6_addr, 16);
        return 1;
    }
    return 0;
}

curl_socket_t imgd_curl_open_socket(const struct curl_sockaddr *address) {
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

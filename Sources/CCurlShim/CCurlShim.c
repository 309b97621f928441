#include "CCurlShim.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int imgd_sockaddr_to_ipv6(const struct sockaddr *address, unsigned int length, unsigned char *out16) {
    if (address == NULL) return 0;
    if (address->sa_family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)address;
        memset(out16, 0, 10);
        out16[10] = 0xff;
        out16[11] = 0xff;
        memcpy(out16 + 12, &v4->sin_addr.s_addr, 4);
        return 1;
    }
    if (address->sa_family == AF_INET6 && length >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)address;
        memcpy(out16, v6->sin6_addr.s6_addr, 16);
        return 1;
    }
    return 0;
}

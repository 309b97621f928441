#define _GNU_SOURCE
#include "CDescriptorPassing.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

ssize_t imgd_send_with_descriptor(int socket, const void *bytes, size_t length, int descriptor) {
    struct iovec part = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        char space[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof(control.space);
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &descriptor, sizeof(int));
    ssize_t sent;
    do {
        sent = sendmsg(socket, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent;
}

ssize_t imgd_receive_with_descriptors(
    int socket, void *bytes, size_t capacity, int *descriptors, int max_descriptors, int *count, int *truncated) {
    *count = 0;
    *truncated = 0;
    struct iovec part = {.iov_base = bytes, .iov_len = capacity};
    // Room for a few descriptors: the daemon sends one per reply; more is a peer's mistake,
    // and the kernel closes what does not fit (reported as truncated).
    union {
        char space[CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr align;
    } control;
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof(control.space);
    ssize_t received;
    do {
        received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return received;
    if (message.msg_flags & MSG_CTRUNC) *truncated = 1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int descriptor;
            memcpy(&descriptor, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (*count < max_descriptors) {
                descriptors[(*count)++] = descriptor;
            } else {
                close(descriptor);
                *truncated = 1;
            }
        }
    }
    return received;
}

ssize_t imgd_copy_file_range(int source, long long *source_offset, int target, size_t length) {
    loff_t offset = *source_offset;
    ssize_t copied = copy_file_range(source, &offset, target, NULL, length, 0);
    *source_offset = offset;
    return copied;
}

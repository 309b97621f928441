#ifndef IMGD_DESCRIPTOR_PASSING_H
#define IMGD_DESCRIPTOR_PASSING_H

#include <stddef.h>
#include <sys/types.h>

/// Passing file descriptors over a Unix stream socket (SCM_RIGHTS). The CMSG_* macros do not
/// import into Swift, so the control messages are built and read here. libc only.

/// Sends `length` bytes of `bytes` with one SCM_RIGHTS control message carrying `descriptor`,
/// without blocking and without SIGPIPE (MSG_DONTWAIT | MSG_NOSIGNAL). Returns the bytes sent
/// (the descriptor went with them when > 0), or -1 with errno set (EAGAIN: the socket buffer
/// is full, nothing sent).
ssize_t imgd_send_with_descriptor(int socket, const void *bytes, size_t length, int descriptor);

/// Receives up to `capacity` bytes into `bytes`, and the descriptors passed with them (at most
/// `max_descriptors`, close-on-exec) into `descriptors`, their number in `*count`.
/// `*truncated` is set to 1 when the kernel dropped descriptors for want of room (MSG_CTRUNC:
/// this process is out of descriptors, or more came than fit). Returns the bytes read (0 at
/// the end of the stream) or -1 with errno set. On Linux a read stops at the byte a descriptor
/// was sent with, so the descriptors belong to the last byte read.
ssize_t imgd_receive_with_descriptors(
    int socket, void *bytes, size_t capacity, int *descriptors, int max_descriptors, int *count, int *truncated);

/// copy_file_range(2) (glibc declares it only under _GNU_SOURCE, which Swift's Glibc module
/// does not set): copies `length` bytes from `source` at `*source_offset` to `target` at its
/// file offset, in the kernel. Used on a passed descriptor by `imgctl get -o`.
ssize_t imgd_copy_file_range(int source, long long *source_offset, int target, size_t length);

#endif

/*
 * The floor of a lookup on this machine: a bare single-threaded epoll server on a Unix socket
 * that answers each line `{"id":N…}` with `{"id":N` and a fixed tail (a real hit's reply from
 * imgd, so the bytes on the wire are the same), with no parsing beyond the id, no cache, no
 * lookup. Replies to everything one read brought are written with one write, as Redis does.
 * bench/lookup-bench.sh --floor runs imgd-lookup-bench against it beside imgd and Redis: what
 * is left between this and imgd is imgd's own work per request.
 *
 *   cc -O2 -o line-floor bench/floor/line_floor.c
 *   line-floor SOCKET TAIL     (TAIL: what follows the id, up to and without the newline)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BUFFER_SIZE 65536
#define MAX_CONNECTIONS 1024

/* A connection's unanswered bytes (a partial line) and its replies not yet written. */
struct connection {
    int fd;
    size_t held;
    char input[BUFFER_SIZE];
    size_t pending, sent;
    int waiting_to_write; /* registered for EPOLLOUT (a reply did not fit the socket) */
    char *output;
    size_t capacity;
};

static const char *tail;
static size_t tail_length;

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void reserve(struct connection *c, size_t more) {
    if (c->pending + more <= c->capacity) return;
    while (c->pending + more > c->capacity) c->capacity = c->capacity ? c->capacity * 2 : 65536;
    c->output = realloc(c->output, c->capacity);
    if (!c->output) fail("realloc");
}

/* Answers every whole line in the input; keeps a partial one. */
static void answer(struct connection *c) {
    size_t start = 0;
    for (;;) {
        char *newline = memchr(c->input + start, '\n', c->held - start);
        if (!newline) break;
        size_t end = (size_t)(newline - c->input);
        const char *id = c->input + start + 6; /* after {"id": */
        size_t digits = 0;
        while (start + 6 + digits < end && id[digits] >= '0' && id[digits] <= '9') digits++;
        reserve(c, 6 + digits + tail_length + 1);
        memcpy(c->output + c->pending, "{\"id\":", 6);
        memcpy(c->output + c->pending + 6, id, digits);
        memcpy(c->output + c->pending + 6 + digits, tail, tail_length);
        c->pending += 6 + digits + tail_length;
        c->output[c->pending++] = '\n';
        start = end + 1;
    }
    memmove(c->input, c->input + start, c->held - start);
    c->held -= start;
}

/* Writes what it can; returns 0 when everything was written. */
static int flush(struct connection *c) {
    while (c->sent < c->pending) {
        ssize_t n = write(c->fd, c->output + c->sent, c->pending - c->sent);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return 1;
        if (n < 0) return -1;
        c->sent += (size_t)n;
    }
    c->pending = c->sent = 0;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: line-floor SOCKET TAIL\n"); return 2; }
    tail = argv[2];
    tail_length = strlen(tail);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", argv[1]);
    unlink(argv[1]);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) fail("bind");
    if (listen(listener, 512) < 0) fail("listen");
    int poller = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    struct epoll_event ready[64];
    for (;;) {
        int count = epoll_wait(poller, ready, 64, -1);
        if (count < 0 && errno == EINTR) continue;
        if (count < 0) fail("epoll_wait");
        for (int i = 0; i < count; i++) {
            struct connection *c = ready[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    c = calloc(1, sizeof *c);
                    c->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(poller, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            int closed = 0;
            if (ready[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t n = read(c->fd, c->input + c->held, BUFFER_SIZE - c->held);
                if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) closed = 1;
                if (n > 0) { c->held += (size_t)n; answer(c); }
                if (c->held == BUFFER_SIZE) closed = 1; /* a line longer than the buffer */
            }
            int state = closed ? -1 : flush(c);
            if (state < 0) {
                close(c->fd);
                free(c->output);
                free(c);
                continue;
            }
            if (state != c->waiting_to_write) {
                struct epoll_event e = {.events = state ? EPOLLOUT : EPOLLIN, .data.ptr = c};
                epoll_ctl(poller, EPOLL_CTL_MOD, c->fd, &e);
                c->waiting_to_write = state;
            }
        }
    }
}

/*
 * What it costs to give a small file its final name, five ways (bench/README.md, "Where imgd's
 * time goes (2026-11-25)"). Writes N files of 16 KB into DIR/<2 hex>/<64 chars>, as imgd's
 * cache does, and prints the CPU seconds the loop took.
 *
 *   cc -O2 -o /tmp/publish_bench bench/publish_bench.c
 *   /tmp/publish_bench DIR WAY [N]     WAY: direct | tmp-rename | same-folder-rename |
 *                                           tmpfile-proc-link | tmpfile-empty-path-link
 *
 * DIR must not exist yet (its parent must). Run it on the filesystem to be measured (the
 * benchmarks use a journaled ext4 loop image), several times and alternating WAYs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void fail(const char *what) {
    perror(what);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR WAY [N]\n", argv[0]);
        return 2;
    }
    const char *root = argv[1], *way = argv[2];
    int count = argc > 3 ? atoi(argv[3]) : 20000;
    static char body[16384];
    memset(body, 7, sizeof body);

    if (mkdir(root, 0755) != 0) fail("mkdir DIR");
    int root_fd = open(root, O_RDONLY | O_DIRECTORY);
    if (mkdirat(root_fd, "tmp", 0755) != 0) fail("mkdir tmp");
    int tmp_fd = openat(root_fd, "tmp", O_RDONLY | O_DIRECTORY);
    int folder_fd[256];
    for (int i = 0; i < 256; i++) {
        char name[3];
        snprintf(name, sizeof name, "%02x", i);
        if (mkdirat(root_fd, name, 0755) != 0) fail("mkdir fan-out");
        folder_fd[i] = openat(root_fd, name, O_RDONLY | O_DIRECTORY);
    }
    sync();

    double start = cpu_seconds();
    for (int i = 0; i < count; i++) {
        unsigned hash = (unsigned)i * 2654435761u;
        int folder = folder_fd[hash >> 24];
        char name[80], relative[90], temp[96], proc[64];
        snprintf(name, sizeof name, "%08x%056d", hash, i);
        snprintf(relative, sizeof relative, "%02x/%s", hash >> 24, name);
        int fd;
        if (strcmp(way, "direct") == 0) {
            fd = openat(folder, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, body, sizeof body) != sizeof body) fail("direct");
            close(fd);
        } else if (strcmp(way, "tmp-rename") == 0) {
            snprintf(temp, sizeof temp, "%s.part", name);
            fd = openat(tmp_fd, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, body, sizeof body) != sizeof body) fail("tmp-rename");
            close(fd);
            if (renameat(tmp_fd, temp, root_fd, relative) != 0) fail("renameat");
        } else if (strcmp(way, "same-folder-rename") == 0) {
            snprintf(temp, sizeof temp, ".%s.part", name);
            fd = openat(folder, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, body, sizeof body) != sizeof body) fail("same-folder-rename");
            close(fd);
            if (renameat(folder, temp, folder, name) != 0) fail("renameat");
        } else if (strcmp(way, "tmpfile-proc-link") == 0) {
            fd = openat(folder, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, body, sizeof body) != sizeof body) fail("tmpfile-proc-link");
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
            if (linkat(AT_FDCWD, proc, folder, name, AT_SYMLINK_FOLLOW) != 0) fail("linkat");
            close(fd);
        } else if (strcmp(way, "tmpfile-empty-path-link") == 0) {
            fd = openat(folder, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, body, sizeof body) != sizeof body) fail("tmpfile-empty-path-link");
            if (linkat(fd, "", folder, name, AT_EMPTY_PATH) != 0) fail("linkat (AT_EMPTY_PATH)");
            close(fd);
        } else {
            fprintf(stderr, "unknown WAY %s\n", way);
            return 2;
        }
    }
    printf("%s: %d files, %.3f CPU s\n", way, count, cpu_seconds() - start);
    return 0;
}

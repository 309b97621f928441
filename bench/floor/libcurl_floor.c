/*
 * The floor of a prefetch on this machine: a bare libcurl multi loop, no daemon, no index, no
 * queue, no policy (bench/README.md, "Floors"). It downloads every URL of a list with at most
 * N transfers at once and saves each body under OUT/<the URL's path>, as `curl --parallel`
 * does, and optionally does the per-byte work imgd cannot skip:
 *
 *   --digest        SHA-256 of every byte (OpenSSL EVP, as imgd does)
 *   --publish       write to a temporary name beside the file, then rename (atomic publish)
 *   --hash-thread   hand each received piece to a second thread that hashes and writes it,
 *                   so the digest runs beside the receive (imgd's spill lanes do the same)
 *
 *   cc -O2 -o libcurl-floor bench/floor/libcurl_floor.c -lcurl -lcrypto -lpthread
 *   libcurl-floor [--parallel N] [--cacert FILE] [--http2] [--digest] [--publish]
 *                 [--hash-thread] --out DIR LIST
 *
 * Exit status 0 when every URL answered 200 and was saved, 1 otherwise (a line per failure).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One body on its way to disk. */
struct body {
    int fd;
    EVP_MD_CTX *digest;
    char path[4096];
    char temporary[4112];
};

/* A piece for the hashing thread: data of a body, or (data == NULL) the end of it. */
struct job {
    struct job *next;
    struct body *body;
    size_t length;
    unsigned char data[];
};

static struct {
    int digest, publish, hash_thread;
    const char *out;
} options;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct job *head, *tail;
    size_t queued_bytes;
    int closed;
    int failures;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0};

/* Bytes the receive may run ahead of the hashing thread before it waits. */
#define QUEUE_LIMIT (8u << 20)

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void write_all(int fd, const unsigned char *data, size_t length) {
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("write");
        data += n;
        length -= (size_t)n;
    }
}

/* Creates PATH's parent folders (mkdir -p of everything before the last slash). */
static void make_parents(char *path) {
    for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        if (mkdir(path, 0755) < 0 && errno != EEXIST) fail(path);
        *slash = '/';
    }
}

static int open_body_file(char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
        make_parents(path);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0) fail(path);
    return fd;
}

static void absorb(struct body *body, const unsigned char *data, size_t length) {
    if (options.digest) EVP_DigestUpdate(body->digest, data, length);
    write_all(body->fd, data, length);
}

/* Ends a body: the digest's last block, close, and the rename when publishing. */
static void finish(struct body *body) {
    if (options.digest) {
        unsigned char sum[32];
        unsigned int size = 0;
        EVP_DigestFinal_ex(body->digest, sum, &size);
        EVP_MD_CTX_free(body->digest);
    }
    if (close(body->fd) < 0) fail("close");
    if (options.publish && rename(body->temporary, body->path) < 0) fail("rename");
    free(body);
}

static void enqueue(struct body *body, const void *data, size_t length) {
    struct job *job = malloc(sizeof *job + length);
    if (!job) fail("malloc");
    job->next = NULL;
    job->body = body;
    job->length = data ? length : (size_t)-1;
    if (data) memcpy(job->data, data, length);
    pthread_mutex_lock(&queue.lock);
    while (queue.queued_bytes > QUEUE_LIMIT) pthread_cond_wait(&queue.changed, &queue.lock);
    if (queue.tail) queue.tail->next = job; else queue.head = job;
    queue.tail = job;
    queue.queued_bytes += data ? length : 0;
    pthread_cond_broadcast(&queue.changed);
    pthread_mutex_unlock(&queue.lock);
}

static void *hashing_thread(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&queue.lock);
        while (!queue.head && !queue.closed) pthread_cond_wait(&queue.changed, &queue.lock);
        struct job *jobs = queue.head;
        queue.head = queue.tail = NULL;
        pthread_mutex_unlock(&queue.lock);
        if (!jobs) return NULL;
        size_t done = 0;
        while (jobs) {
            struct job *next = jobs->next;
            if (jobs->length == (size_t)-1) {
                finish(jobs->body);
            } else {
                absorb(jobs->body, jobs->data, jobs->length);
                done += jobs->length;
            }
            free(jobs);
            jobs = next;
        }
        pthread_mutex_lock(&queue.lock);
        queue.queued_bytes -= done;
        pthread_cond_broadcast(&queue.changed);
        pthread_mutex_unlock(&queue.lock);
    }
}

static size_t on_data(char *data, size_t size, size_t count, void *context) {
    size_t length = size * count;
    if (options.hash_thread) enqueue(context, data, length);
    else absorb(context, (const unsigned char *)data, length);
    return length;
}

/* Points HANDLE at URL with a fresh body saved under OUT/<the URL's path>. */
static void start(CURL *handle, const char *url) {
    const char *path = strstr(url, "://");
    path = path ? strchr(path + 3, '/') : NULL;
    if (!path) { fprintf(stderr, "no path in %s\n", url); exit(1); }
    struct body *body = calloc(1, sizeof *body);
    if (!body) fail("calloc");
    snprintf(body->path, sizeof body->path, "%s%s", options.out, path);
    snprintf(body->temporary, sizeof body->temporary, "%s.tmp", body->path);
    body->fd = open_body_file(options.publish ? body->temporary : body->path);
    if (options.digest) {
        body->digest = EVP_MD_CTX_new();
        EVP_DigestInit_ex(body->digest, EVP_sha256(), NULL);
    }
    curl_easy_setopt(handle, CURLOPT_URL, url);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(handle, CURLOPT_PRIVATE, body);
}

int main(int argc, char **argv) {
    long parallel = 16;
    const char *cacert = NULL, *list = NULL;
    int http2 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--parallel") && i + 1 < argc) parallel = atol(argv[++i]);
        else if (!strcmp(argv[i], "--cacert") && i + 1 < argc) cacert = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) options.out = argv[++i];
        else if (!strcmp(argv[i], "--http2")) http2 = 1;
        else if (!strcmp(argv[i], "--digest")) options.digest = 1;
        else if (!strcmp(argv[i], "--publish")) options.publish = 1;
        else if (!strcmp(argv[i], "--hash-thread")) options.hash_thread = 1;
        else if (argv[i][0] != '-' && !list) list = argv[i];
        else { fprintf(stderr, "usage: see the comment at the top of libcurl_floor.c\n"); return 2; }
    }
    if (!list || !options.out || parallel < 1) { fprintf(stderr, "a LIST and --out DIR are needed\n"); return 2; }

    FILE *file = fopen(list, "r");
    if (!file) fail(list);
    size_t count = 0, capacity = 1024;
    char **urls = malloc(capacity * sizeof *urls), line[8192];
    while (fgets(line, sizeof line, file)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        if (count == capacity) urls = realloc(urls, (capacity *= 2) * sizeof *urls);
        urls[count++] = strdup(line);
    }
    fclose(file);

    pthread_t hasher;
    if (options.hash_thread && pthread_create(&hasher, NULL, hashing_thread, NULL)) fail("pthread_create");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, parallel);
    if (http2) curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    size_t next = 0, running_handles = 0;
    int failures = 0;
    for (long i = 0; i < parallel && next < count; i++) {
        CURL *handle = curl_easy_init();
        curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(handle, CURLOPT_HTTP_VERSION, http2 ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
        if (http2) curl_easy_setopt(handle, CURLOPT_PIPEWAIT, 1L);
        if (cacert) curl_easy_setopt(handle, CURLOPT_CAINFO, cacert);
        start(handle, urls[next++]);
        curl_multi_add_handle(multi, handle);
        running_handles++;
    }
    while (running_handles > 0) {
        int still_running = 0, queued = 0;
        if (curl_multi_perform(multi, &still_running) != CURLM_OK) { fprintf(stderr, "curl_multi_perform failed\n"); return 1; }
        CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &queued))) {
            if (message->msg != CURLMSG_DONE) continue;
            CURL *handle = message->easy_handle;
            struct body *body;
            long status = 0;
            char *url = NULL;
            curl_easy_getinfo(handle, CURLINFO_PRIVATE, (char **)&body);
            curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
            curl_easy_getinfo(handle, CURLINFO_EFFECTIVE_URL, &url);
            if (message->data.result != CURLE_OK || status != 200) {
                fprintf(stderr, "%s: %s, status %ld\n", url, curl_easy_strerror(message->data.result), status);
                failures++;
            }
            if (options.hash_thread) enqueue(body, NULL, 0); else finish(body);
            curl_multi_remove_handle(multi, handle);
            if (next < count) {
                start(handle, urls[next++]);
                curl_multi_add_handle(multi, handle);
            } else {
                curl_easy_cleanup(handle);
                running_handles--;
            }
        }
        if (running_handles > 0 && curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK) { fprintf(stderr, "curl_multi_poll failed\n"); return 1; }
    }
    if (options.hash_thread) {
        pthread_mutex_lock(&queue.lock);
        queue.closed = 1;
        pthread_cond_broadcast(&queue.changed);
        pthread_mutex_unlock(&queue.lock);
        pthread_join(hasher, NULL);
    }
    curl_multi_cleanup(multi);
    return failures ? 1 : 0;
}

/*
 * The floor of an empty `imgd prefetch` on this machine: a C program that does what such a run
 * cannot skip — load libcurl, OpenSSL and SQLite, set libcurl up, open the cache's index and
 * read from it — and nothing else (bench/start-bench.sh --floor times it beside imgd).
 *
 *   cc -O2 -o start-floor bench/floor/start_floor.c -lcurl -lcrypto -lsqlite3
 *   start-floor INDEX.sqlite
 */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: start-floor INDEX.sqlite\n"); return 2; }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    CURLM *multi = curl_multi_init();
    EVP_MD_CTX *digest = EVP_MD_CTX_new();
    EVP_DigestInit_ex(digest, EVP_sha256(), NULL);
    sqlite3 *index = NULL;
    if (sqlite3_open_v2(argv[1], &index, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], sqlite3_errmsg(index));
        return 1;
    }
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(index, "SELECT count(*) FROM sqlite_master", -1, &statement, NULL) != SQLITE_OK
        || sqlite3_step(statement) != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", argv[1], sqlite3_errmsg(index));
        return 1;
    }
    sqlite3_finalize(statement);
    sqlite3_close(index);
    EVP_MD_CTX_free(digest);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return 0;
}

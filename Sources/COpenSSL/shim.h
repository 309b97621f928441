#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

/// The SHA-256 of `count` bytes at `bytes`, into `digest` (32 bytes), through OpenSSL's direct
/// SHA-256 functions rather than EVP. The code that hashes is the same (the CPU's SHA
/// extensions); what differs is EVP's first use in a process, which fetches a provider: about
/// 1.2 ms on this project's machine, a fifth of an `imgctl get`, which hashes once. OpenSSL 3
/// deprecates these functions in favour of EVP but keeps them; the deprecation is silenced here,
/// the only place they are named. The daemon, which hashes all day, uses EVP (`SHA256Digest`):
/// measured with these instead, neither its lookups nor a warm of large images changed.
static inline void imgd_sha256_direct(const void *bytes, size_t count, unsigned char *digest) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, bytes, count);
    SHA256_Final(digest, &context);
#pragma GCC diagnostic pop
}

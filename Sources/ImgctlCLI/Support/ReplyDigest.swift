import COpenSSL

/// The SHA-256 `imgctl` checks a `get` reply's bytes against, with OpenSSL's direct SHA-256
/// (`imgd_sha256_direct`): a process that hashes once would spend more on EVP's first use than
/// on the hash (see the shim). ImgdCore's `SHA256Digest` is the daemon's; `imgctl` links neither
/// ImgdCore nor libcurl.
enum ReplyDigest {
    /// The digest of `bytes`, as 64 lower-case hex digits.
    static func hex(of bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex(of: $0) }
    }

    /// The digest of the bytes at `input` (a file mapped in, say), as 64 lower-case hex digits.
    static func hex(of input: UnsafeRawBufferPointer) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { output in
            imgd_sha256_direct(input.baseAddress, input.count, output.baseAddress)
        }
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(64)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

import COpenSSL

#if canImport(Glibc)
import Glibc
#endif

/// A SHA-256 digest (32 bytes), computed with OpenSSL so it uses the CPU's SHA extensions.
public struct SHA256Digest: Hashable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes, as four big-endian words (a fixed-size value: no heap allocation).
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest of `bytes`.
    public init(of bytes: UnsafeRawBufferPointer) {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        self = hasher.finish()
    }

    /// The digest of `bytes`.
    public init<Bytes: Sequence<UInt8>>(of bytes: Bytes) {
        let array = Array(bytes)
        self = array.withUnsafeBytes { SHA256Digest(of: $0) }
    }

    /// The digest of the first `count` bytes of an open file, read with `pread` (the file
    /// offset is left alone), 256 KiB at a time.
    public init(fileDescriptor: Int32, count: Int) throws(FileReadError) {
        var hasher = SHA256Hasher()
        let chunk = 256 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < count {
            let got = pread(fileDescriptor, buffer.baseAddress, min(chunk, count - offset), off_t(offset))
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw FileReadError(errno: got < 0 ? errno : EIO) }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
            offset += got
        }
        self = hasher.finish()
    }

    /// A digest from its 32 bytes (as stored in the index); nil for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self = bytes.withUnsafeBytes { SHA256Digest(rawBytes: $0) }
    }

    /// The 32 digest bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [words.0, words.1, words.2, words.3] {
            withUnsafeBytes(of: word.bigEndian) { out.append(contentsOf: $0) }
        }
        return out
    }

    init(rawBytes: UnsafeRawBufferPointer) {
        precondition(rawBytes.count == 32)
        func word(_ index: Int) -> UInt64 {
            rawBytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self).bigEndian
        }
        words = (word(0), word(1), word(2), word(3))
    }

    /// The digest as 64 lower-case hexadecimal characters.
    public var hex: String {
        var out = [UInt8](repeating: 0, count: 64)
        let digits = Array("0123456789abcdef".utf8)
        for (wordIndex, word) in [words.0, words.1, words.2, words.3].enumerated() {
            for nibble in 0..<16 {
                out[wordIndex * 16 + nibble] = digits[Int((word >> UInt64(60 - nibble * 4)) & 0xF)]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The first two bytes, as a number 0…65535.
    public var leadingBytes: Int { Int(words.0 >> 48) }

    public var description: String { hex }

    public static func == (lhs: SHA256Digest, rhs: SHA256Digest) -> Bool {
        lhs.words == rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}

/// An incremental SHA-256 over bytes that arrive in pieces (a body streaming from the network).
///
/// Not copyable: it owns an OpenSSL context, freed when the hasher goes away.
public struct SHA256Hasher: ~Copyable {
    private let context: OpaquePointer

    public init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            // Only an out-of-memory OpenSSL fails here; there is nothing sensible to carry on with.
            fatalError("OpenSSL could not initialise a SHA-256 context")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `bytes` to the digest.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The digest of everything added so far; the hasher starts over empty afterwards.
    public mutating func finish() -> SHA256Digest {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        output.withUnsafeMutableBufferPointer { _ = EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        return output.withUnsafeBytes { SHA256Digest(rawBytes: $0) }
    }
}

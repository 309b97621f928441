import COpenSSL
import ImgdBase

#if canImport(Glibc)
import Glibc
#endif

/// A SHA-256 digest (32 bytes), computed with OpenSSL so it uses the CPU's SHA extensions.
public struct SHA256Digest: Hashable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes, as four big-endian words (a fixed-size value: no heap allocation).
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest of `bytes`, in one call (no context of ours to set up: a cache key is the
    /// digest of a URL, computed for every lookup).
    public init(of bytes: UnsafeRawBufferPointer) {
        self = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { output in
            var length: UInt32 = 32
            let done = EVP_Digest(
                bytes.baseAddress ?? UnsafeRawPointer(output.baseAddress!), bytes.count, output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                &length, SHA256Algorithm.shared.md, nil)
            precondition(done == 1 && length == 32, "OpenSSL could not compute a SHA-256 digest")
            return SHA256Digest(rawBytes: UnsafeRawBufferPointer(output))
        }
    }

    /// The digest of `bytes` (copied first only when they are not already contiguous).
    public init<Bytes: Sequence<UInt8>>(of bytes: Bytes) {
        if let digest = bytes.withContiguousStorageIfAvailable({ SHA256Digest(of: UnsafeRawBufferPointer($0)) }) {
            self = digest
        } else {
            let array = Array(bytes)
            self = array.withUnsafeBytes { SHA256Digest(of: $0) }
        }
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
            let got = retryingOnInterrupt { pread(fileDescriptor, buffer.baseAddress, min(chunk, count - offset), off_t(offset)) }
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

    /// The digest written as 64 hexadecimal characters (either case); nil for anything else.
    public init?(hex text: String) {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        for index in 0..<32 {
            guard let high = Self.hexValue(digits[2 * index]), let low = Self.hexValue(digits[2 * index + 1]) else { return nil }
            bytes[index] = high << 4 | low
        }
        self.init(bytes: bytes)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
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
        String(unsafeUninitializedCapacity: 64) { out in
            writeHex(into: out.baseAddress!)
            return 64
        }
    }

    /// Writes the 64 lower-case hexadecimal characters at `out`.
    public func writeHex(into out: UnsafeMutablePointer<UInt8>) {
        let digits: StaticString = "0123456789abcdef"
        for (wordIndex, word) in [words.0, words.1, words.2, words.3].enumerated() {
            for nibble in 0..<16 {
                out[wordIndex * 16 + nibble] = digits.utf8Start[Int((word >> UInt64(60 - nibble * 4)) & 0xF)]
            }
        }
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
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, SHA256Algorithm.shared.md, nil) == 1 else {
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
        let digest = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { output in
            var length: UInt32 = 32
            _ = EVP_DigestFinal_ex(context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length)
            return SHA256Digest(rawBytes: UnsafeRawBufferPointer(output))
        }
        EVP_DigestInit_ex(context, SHA256Algorithm.shared.md, nil)
        return digest
    }
}

/// OpenSSL's SHA-256 implementation, looked up once. `EVP_sha256()` hands OpenSSL 3 a legacy
/// descriptor that it resolves again (a locked lookup by name) at every digest it starts; for
/// the short inputs of cache keys that lookup cost more than the hashing.
struct SHA256Algorithm: @unchecked Sendable {
    /// Immutable once fetched and reference-counted by OpenSSL: any thread may use it.
    let md: OpaquePointer

    static let shared: SHA256Algorithm = {
        guard let md = EVP_MD_fetch(nil, "SHA2-256", nil) else {
            fatalError("OpenSSL has no SHA2-256 implementation (is its default provider missing?)")
        }
        return SHA256Algorithm(md: md)
    }()
}

import ImgdCore

/// The name of an entry dropped in the spool, as the bytes it has on disk.
///
/// Names on Linux are bytes, not text: a member can drop `list\xff.txt`, which no `String`
/// holds. The entry is opened, checked and moved by its bytes; everything after the claim (the
/// list's name in `lists` and in its report, its files in `.claimed/`, `done/`, `failed/`)
/// uses ``display``, and files are named by ``fileName(for:)``, which always fits NAME_MAX.
public struct SpoolEntryName: Sendable, Hashable, CustomStringConvertible {
    /// The name's bytes, without a terminating NUL.
    public let bytes: [UInt8]

    public init(bytes: some Collection<UInt8>) {
        self.bytes = Array(bytes)
    }

    public init(_ name: String) {
        bytes = Array(name.utf8)
    }

    /// The name as text: itself when it is valid UTF-8 (control characters and all: JSON
    /// escapes them, the log escapes them), else escaped (`list\xff.txt`).
    public var display: String {
        String(validating: bytes, as: UTF8.self) ?? EchoedText.escape(bytes: bytes, limit: nil)
    }

    public var description: String { display }

    /// True for a name a writer may still be using (`.` first, `.tmp` or `.part` last), or one
    /// of the spool's own folders (`done`, `failed`).
    public var isIgnored: Bool {
        bytes.first == UInt8(ascii: ".") || bytes.ends(with: Self.tmp) || bytes.ends(with: Self.part)
            || bytes == Self.done || bytes == Self.failed
    }

    private static let tmp = Array(".tmp".utf8), part = Array(".part".utf8)
    private static let done = Array("done".utf8), failed = Array("failed".utf8)

    /// Calls `body` with the name as a C string (for `openat`, `fstatat`, `unlinkat`, `renameat`).
    public func withCString<T>(_ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
        try (bytes + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    /// Bytes a file name the spool makes from a list's name may take: NAME_MAX (255) less room
    /// for what is added to it — `<id>.` in `.claimed/` (up to 20 bytes), `.N` when the name is
    /// taken in `done/` or `failed/` (up to 4), `.report.json` (12).
    public static let fileNameLimit = 255 - 20 - 4 - 12

    /// `name` as a file name that fits ``fileNameLimit``: itself when short enough, else its
    /// first bytes (cut on a character), `~`, and 8 hex digits of a hash of the whole name, so
    /// two long names with the same start stay apart: `aaaa…aaa~3f2a9c01`.
    public static func fileName(for name: String) -> String {
        let bytes = Array(name.utf8)
        guard bytes.count > fileNameLimit else { return name }
        var hash: UInt32 = 2_166_136_261  // FNV-1a: stable across runs, unlike Hasher
        for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let suffix = "~" + String(hash, radix: 16).leftPadded(to: 8)
        var kept = fileNameLimit - suffix.utf8.count
        // Back to the start of a character: a cut inside one would leave invalid UTF-8.
        while kept > 0, bytes[kept] & 0xC0 == 0x80 { kept -= 1 }
        return String(decoding: bytes[..<kept], as: UTF8.self) + suffix
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && self[(count - suffix.count)...].elementsEqual(suffix)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: Swift.max(0, width - count)) + self
    }
}

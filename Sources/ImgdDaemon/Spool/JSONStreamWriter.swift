import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// Writes JSON text to a file as it is produced, through one buffer of 64 KiB: a report of any
/// length holds one buffer and one value at a time, never the whole document.
///
/// The caller lays out the document (keys in order, commas, new lines); this type writes
/// literals and strings. Strings are escaped as JSON requires (`"`, `\` and C0 controls), and
/// DEL, C1 controls (U+0080–U+009F) and U+2028/U+2029 too, so that `cat report.json` sends no
/// control sequence to a terminal; the text a JSON parser reads back is the original.
struct JSONStreamWriter: ~Copyable {
    static let bufferSize = 64 * 1024

    private let fileDescriptor: Int32
    private var buffer: [UInt8] = []
    /// The first write error (errno); once set, nothing more is written.
    private(set) var error: Int32?

    /// Writes to `fileDescriptor`, which stays the caller's (not closed here).
    init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
        buffer.reserveCapacity(Self.bufferSize)
    }

    /// Text written as it is: punctuation, keys known to need no escaping, numbers.
    mutating func raw(_ text: String) {
        var text = text
        text.withUTF8 { append($0) }
    }

    mutating func int(_ value: Int) {
        raw(String(value))
    }

    /// `text` as a JSON string. With `limit`, only its first `limit` bytes (cut at a character
    /// boundary, ``EchoedText/cut(_:limit:)``) are written, followed by `…[N more bytes]`.
    mutating func string(_ text: String, limit: Int? = nil) {
        var text = limit.map { EchoedText.cut(text, limit: $0) } ?? text
        append(UInt8(ascii: "\""))
        text.withUTF8 { escape($0) }
        append(UInt8(ascii: "\""))
    }

    /// Writes what is buffered.
    mutating func flush() {
        guard error == nil, !buffer.isEmpty else {
            buffer.removeAll(keepingCapacity: true)
            return
        }
        do throws(WriteError) {
            try writeAll(fileDescriptor, buffer)
        } catch {
            self.error = error.errno
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private mutating func append(_ byte: UInt8) {
        if buffer.count >= Self.bufferSize { flush() }
        buffer.append(byte)
    }

    private mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        if buffer.count + bytes.count > Self.bufferSize { flush() }
        if bytes.count > Self.bufferSize {
            // Larger than the buffer: written through it a buffer at a time.
            var rest = bytes[...]
            while !rest.isEmpty {
                let part = rest.prefix(Self.bufferSize - buffer.count)
                buffer.append(contentsOf: part)
                rest = rest.dropFirst(part.count)
                if buffer.count >= Self.bufferSize { flush() }
            }
            return
        }
        buffer.append(contentsOf: bytes)
    }

    private static let hex = Array("0123456789abcdef".utf8)

    private mutating func escape(_ bytes: UnsafeBufferPointer<UInt8>) {
        var index = 0
        var runStart = 0
        while index < bytes.count {
            let byte = bytes[index]
            var escaped: [UInt8]?
            var width = 1
            switch byte {
            case UInt8(ascii: "\""): escaped = Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): escaped = Array(#"\\"#.utf8)
            case 0x0A: escaped = Array(#"\n"#.utf8)
            case 0x0D: escaped = Array(#"\r"#.utf8)
            case 0x09: escaped = Array(#"\t"#.utf8)
            case 0x00..<0x20, 0x7F: escaped = Self.unicodeEscape(UInt32(byte))
            case 0xC2 where index + 1 < bytes.count && (0x80...0x9F).contains(bytes[index + 1]):
                // U+0080–U+009F, C1 controls (0xC2 0x80–0x9F in UTF-8).
                escaped = Self.unicodeEscape(UInt32(bytes[index + 1]))
                width = 2
            case 0xE2 where index + 2 < bytes.count && bytes[index + 1] == 0x80 && (bytes[index + 2] & 0xFE) == 0xA8:
                // U+2028 and U+2029, line and paragraph separators.
                escaped = Self.unicodeEscape(bytes[index + 2] == 0xA8 ? 0x2028 : 0x2029)
                width = 3
            default: break
            }
            guard let escaped else {
                index += 1
                continue
            }
            if index > runStart { append(UnsafeBufferPointer(rebasing: bytes[runStart..<index])) }
            for byte in escaped { append(byte) }
            index += width
            runStart = index
        }
        if bytes.count > runStart { append(UnsafeBufferPointer(rebasing: bytes[runStart...])) }
    }

    private static func unicodeEscape(_ value: UInt32) -> [UInt8] {
        [UInt8(ascii: "\\"), UInt8(ascii: "u")] + (0..<4).reversed().map { hex[Int((value >> (4 * UInt32($0))) & 0xF)] }
    }
}

/// Text that came from outside (a file name, a URL, a line of a list, a message quoting one),
/// made safe to echo where a person or a line-based reader will see it: a log line, a terminal.
///
/// Such text is written by whoever drops a list or talks to the socket, so it may hold a
/// newline followed by `<0>` (journald would read a forged line at emergency priority), an ESC
/// sequence (that rewrites a terminal), or megabytes of junk. ``escape(_:limit:)`` makes each
/// visible and bounded:
/// - C0 controls and DEL become `\n`, `\r`, `\t` or `\xHH`; C1 controls (U+0080–U+009F, which
///   some terminals obey like ESC sequences) become `\u0085`;
/// - a backslash becomes `\\`, so an escaped form can never be confused with the raw text that
///   spells it;
/// - bytes that are not valid UTF-8 become `\xHH` (names on Linux are bytes, not text);
/// - after `limit` bytes of the input the rest is dropped and replaced by `…[N more bytes]`.
///
/// JSON output does not need this (JSON escapes control characters itself, and carries the
/// original text); a report may still cut with ``cut(_:limit:)``.
public enum EchoedText {
    /// Input bytes kept by default before the rest is replaced by the marker.
    public static let defaultLimit = 512

    /// `text`, escaped and cut after `limit` bytes of it (nil: never cut).
    public static func escape(_ text: String, limit: Int? = defaultLimit) -> String {
        var text = text
        return text.withUTF8 { escape(bytes: $0, limit: limit) }
    }

    /// `bytes` (UTF-8 or not), escaped and cut after `limit` of them (nil: never cut).
    public static func escape(bytes: some Collection<UInt8>, limit: Int? = defaultLimit) -> String {
        let bytes = Array(bytes)
        let kept = cutPoint(bytes, limit: limit)
        var output: [UInt8] = []
        output.reserveCapacity(kept + 16)
        var index = 0
        while index < kept {
            let byte = bytes[index]
            switch byte {
            case 0x5C:
                output += [0x5C, 0x5C]
                index += 1
            case 0x0A:
                output += Array(#"\n"#.utf8)
                index += 1
            case 0x0D:
                output += Array(#"\r"#.utf8)
                index += 1
            case 0x09:
                output += Array(#"\t"#.utf8)
                index += 1
            case 0x00..<0x20, 0x7F:
                appendHex(byte, to: &output)
                index += 1
            case 0x20..<0x7F:
                output.append(byte)
                index += 1
            default:
                let length = scalarLength(bytes, at: index, end: kept)
                guard length > 0 else {
                    appendHex(byte, to: &output)
                    index += 1
                    continue
                }
                // U+0080–U+009F are encoded as C2 80 … C2 9F.
                if byte == 0xC2, bytes[index + 1] < 0xA0 {
                    output += Array("\\u00".utf8)
                    appendHexDigits(bytes[index + 1], to: &output)
                } else {
                    output += bytes[index..<index + length]
                }
                index += length
            }
        }
        if kept < bytes.count {
            output += Array("…[\(bytes.count - kept) more bytes]".utf8)
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// `text` cut after at most `limit` bytes (on a character's boundary) with the marker, and
    /// otherwise unchanged: for output that escapes by itself, such as JSON.
    public static func cut(_ text: String, limit: Int = defaultLimit) -> String {
        let bytes = Array(text.utf8)
        let kept = cutPoint(bytes, limit: limit)
        guard kept < bytes.count else { return text }
        return String(decoding: bytes[..<kept], as: UTF8.self) + "…[\(bytes.count - kept) more bytes]"
    }

    /// How many leading bytes to keep: all when they fit, else at most `limit`, moved back so a
    /// multi-byte character is never split (a cut in the middle would leave an invalid tail).
    private static func cutPoint(_ bytes: [UInt8], limit: Int?) -> Int {
        guard let limit, bytes.count > limit else { return bytes.count }
        var kept = max(limit, 0)
        // Step back over continuation bytes (10xxxxxx) to the start of the character at the cut;
        // keep it only if it ends before the cut. At most 3 steps: a character is at most 4 bytes.
        var start = kept
        while start > 0, kept - start < 3, bytes[start] & 0xC0 == 0x80 { start -= 1 }
        if start < kept, bytes[start] >= 0xC0 {
            let length = scalarLength(bytes, at: start, end: bytes.count)
            if length > 0, start + length > kept { kept = start }
        }
        return kept
    }

    /// The length of the valid UTF-8 sequence at `index` (2…4), or 0 when it is not one (an
    /// overlong form, a surrogate, a value above U+10FFFF, a missing continuation byte, or one
    /// that would run past `end`).
    private static func scalarLength(_ bytes: [UInt8], at index: Int, end: Int) -> Int {
        let lead = bytes[index]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return 0
        }
        guard index + length <= end else { return 0 }
        guard (low...high).contains(bytes[index + 1]) else { return 0 }
        for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 { return 0 }
        return length
    }

    private static func appendHex(_ byte: UInt8, to output: inout [UInt8]) {
        output += [0x5C, 0x78]  // \x
        appendHexDigits(byte, to: &output)
    }

    private static func appendHexDigits(_ byte: UInt8, to output: inout [UInt8]) {
        let digits = Array("0123456789abcdef".utf8)
        output += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
    }
}

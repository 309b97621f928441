#if canImport(Glibc)
import Glibc
#endif

/// The `get` requests a run sends, built once before it starts: for each URL, the bytes that
/// follow the request's id, `,"cmd":"get","fetch":false,"url":"…"}\n`. A client writes
/// `{"id":` and its next id in front, so sending a request copies bytes and formats one number
/// and allocates nothing. Immutable once built, and shared by every client thread.
struct RequestTable: Sendable {
    /// Every URL's request tail, back to back.
    let bytes: [UInt8]
    /// Where each URL's tail starts in `bytes`; one more entry than URLs, the last being `bytes.count`.
    let starts: [Int]

    var count: Int { starts.count - 1 }

    /// The longest tail, so a client can size its send buffer for `depth` requests.
    let longest: Int

    /// Reads one URL a line from `path`; blank lines and `#` comments are skipped.
    init(urlsIn path: String) throws(LookupBenchError) {
        guard let file = fopen(path, "r") else { throw .cannotRead(path) }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var starts: [Int] = []
        var longest = 0
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line).trimmingWhitespace
            if text.isEmpty || text.hasPrefix("#") { continue }
            starts.append(bytes.count)
            bytes.append(contentsOf: #","cmd":"get","fetch":false,"url":""#.utf8)
            bytes.append(contentsOf: Self.jsonEscaped(text))
            bytes.append(contentsOf: "\"}\n".utf8)
            longest = max(longest, bytes.count - starts[starts.count - 1])
        }
        guard !starts.isEmpty else { throw .noURLs(path) }
        starts.append(bytes.count)
        self.bytes = bytes
        self.starts = starts
        self.longest = longest
    }

    /// The text's UTF-8 as a JSON string's contents: `"`, `\` and control characters escaped.
    private static func jsonEscaped(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out += [UInt8(ascii: "\\"), byte]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default:
                out.append(byte)
            }
        }
        return out
    }
}

extension String {
    /// The text without leading and trailing spaces, tabs, CR and LF (no Foundation here).
    var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}

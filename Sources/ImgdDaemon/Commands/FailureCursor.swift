import ImgdCore

/// Where a page of `failed` ends, handed to the client as `next` and back as `after`. Opaque
/// to clients (base64url text): a list's pages go by the failures' place in the list (their
/// seq, so failures recorded meanwhile are neither skipped nor repeated), the remembered
/// failures' by URL (the order they are paged in).
enum FailureCursor: Equatable {
    /// After the list's URL with this seq.
    case listSeq(Int)
    /// After this URL, among the remembered failures.
    case url(String)

    /// The text a client sees.
    var token: String {
        let plain = switch self {
        case .listSeq(let seq): "l:\(seq)"
        case .url(let url): "u:\(url)"
        }
        return Self.swapping(Base64.encode(Array(plain.utf8)), ("+", "-"), ("/", "_"), dropping: "=")
    }

    /// `text` with one ASCII byte put for another, and `dropped` left out: base64 to base64url
    /// and back, byte by byte.
    private static func swapping(
        _ text: String, _ first: (Unicode.Scalar, Unicode.Scalar), _ second: (Unicode.Scalar, Unicode.Scalar),
        dropping dropped: Unicode.Scalar? = nil
    ) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if let dropped, byte == UInt8(ascii: dropped) { continue }
            bytes.append(
                byte == UInt8(ascii: first.0) ? UInt8(ascii: first.1) : byte == UInt8(ascii: second.0) ? UInt8(ascii: second.1) : byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads a cursor a client sent back as `field`; anything this daemon did not hand out is
    /// `invalid_argument`.
    init(token: String, field: String) throws(ControlError) {
        let base64 = Self.swapping(token, ("-", "+"), ("_", "/"))
        let bad = ControlError.invalidArgument(field: field, reason: "not a cursor from a \"next\" of this command")
        // Base64.decode skips whitespace, as systemd's text may hold it; a cursor never does.
        guard !base64.utf8.contains(where: { $0 <= 0x20 }), let bytes = Base64.decode(base64),
            let plain = String(validating: bytes, as: UTF8.self)
        else { throw bad }
        if plain.hasPrefix("l:"), let seq = Int(plain.dropFirst(2)), seq >= 0 {
            self = .listSeq(seq)
        } else if plain.hasPrefix("u:"), plain.utf8.count > 2 {
            self = .url(String(plain.dropFirst(2)))
        } else {
            throw bad
        }
    }
}

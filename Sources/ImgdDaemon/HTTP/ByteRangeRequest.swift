/// A request's `Range` header read against an image of known size (RFC 9110 §14): one
/// `bytes=` range is served as 206; several, or a header imgd cannot read, mean the whole
/// image (the RFC lets a server ignore them); a range wholly past the end is 416.
enum ByteRangeRequest: Sendable, Equatable {
    case whole
    /// The bytes to send, `lowerBound..<upperBound`, within the image.
    case partial(Range<Int>)
    case unsatisfiable

    /// What `header` (the `Range` value, nil when absent) asks of an image of `size` bytes.
    static func of(_ header: String?, size: Int) -> ByteRangeRequest {
        guard let header else { return .whole }
        let trimmed = header.trimmingSpaces
        guard trimmed.hasPrefix("bytes=") else { return .whole }
        let spec = trimmed.dropFirst(6)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingSpaces, last = spec[spec.index(after: dash)...].trimmingSpaces
        if first.isEmpty {
            // A suffix: the last n bytes.
            guard let count = Self.number(last) else { return .whole }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - count)..<size)
        }
        guard let start = Self.number(first) else { return .whole }
        let end: Int
        if last.isEmpty {
            end = size - 1
        } else {
            guard let given = Self.number(last), given >= start else { return .whole }
            end = min(given, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .partial(start..<(end + 1))
    }

    /// A decimal number of at most 18 digits (no sign, no overflow).
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    var trimmingSpaces: Substring {
        var slice = self[...]
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return Substring(slice)
    }
}

/// The name of a query parameter to leave out of a cache key, as written in
/// `key-ignore-query`: exact (`Expires`) or with `*` standing for any run of characters
/// (`X-Amz-*`). Compared without regard to ASCII case, as the signing schemes' own parameter
/// names are spelt in more than one case by different SDKs.
public struct QueryNamePattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern as written.
    public let text: String
    private let parts: [[UInt8]]

    /// Throws when `text` is empty or holds a character no parameter name has (`&`, `=`, `#`,
    /// a space or a control character).
    public init(_ text: String) throws(HostPatternError) {
        guard !text.isEmpty else { throw HostPatternError(pattern: text, reason: "an empty query parameter name") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && !"&=#".utf8.contains($0) }) else {
            throw HostPatternError(pattern: text, reason: "a query parameter name has no '&', '=', '#', spaces or control characters")
        }
        self.text = text
        parts = text.utf8.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false).map { $0.map(Self.lower) }
    }

    /// Whether the parameter named `name` (as it appears in the URL) is one this pattern names.
    public func matches<Name: Collection<UInt8>>(_ name: Name) -> Bool {
        let name = name.map(Self.lower)
        guard parts.count > 1 else { return name == parts[0] }
        // `*` between the parts: the first part is a prefix, the last a suffix, the ones
        // between appear in order (the leftmost match of each is the right one to take).
        guard name.starts(with: parts[0]), name.count >= parts[0].count + parts[parts.count - 1].count,
            name.reversed().starts(with: parts[parts.count - 1].reversed())
        else { return false }
        var position = parts[0].count
        let end = name.count - parts[parts.count - 1].count
        for part in parts.dropFirst().dropLast() where !part.isEmpty {
            guard let found = Self.find(part, in: name, from: position, before: end) else { return false }
            position = found + part.count
        }
        return true
    }

    public var description: String { text }

    private static func lower(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    private static func find(_ part: [UInt8], in name: [UInt8], from start: Int, before end: Int) -> Int? {
        guard end - start >= part.count else { return nil }
        for index in start...(end - part.count) where name[index..<(index + part.count)].elementsEqual(part) {
            return index
        }
        return nil
    }
}

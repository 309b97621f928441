/// The decoded bytes of one JSON string or plist `<string>`, gathered as they are decoded,
/// trimmed, and capped at ``ImageURL/maximumLength``: past the cap only the length is counted,
/// so an over-long string is reported with its true length without ever being held whole.
///
/// Leading whitespace is dropped as it arrives and trailing whitespace is left out at the end,
/// as the text reader trims its lines, so `" https://a/1.png\n"` is a URL.
struct LinkListStringBuffer {
    /// The kept bytes: all of the string (after leading whitespace) while it is within the cap.
    private var bytes: [UInt8] = []
    /// Bytes decoded after the leading whitespace.
    private var length = 0
    /// `length` at the last byte that was not whitespace: the trimmed length.
    private var trimmedLength = 0
    /// Why the string cannot be a URL whatever it says (a lone UTF-16 surrogate).
    var problem: String?

    /// False for a buffer that only checks (a string skipped inside a non-string element).
    private let keeps: Bool
    /// The most bytes kept: ``ImageURL/maximumLength`` for a URL, less for an object's member
    /// names and option values.
    private let limit: Int

    init() {
        keeps = true
        limit = ImageURL.maximumLength
        // Reserved once, so the buffer never grows past the cap.
        bytes.reserveCapacity(ImageURL.maximumLength)
    }

    /// A buffer keeping at most `limit` bytes, which takes memory only once used (an object
    /// item's member names and option values: a list of plain strings never needs it).
    init(limit: Int) {
        keeps = true
        self.limit = limit
    }

    private init(keeps: Bool) {
        self.keeps = keeps
        limit = 0
    }

    /// A buffer that keeps nothing, for strings that are skipped.
    static var discarding: LinkListStringBuffer { LinkListStringBuffer(keeps: false) }

    /// Bytes this buffer holds on to, for the memory bound tests check.
    var capacity: Int { bytes.capacity }

    /// Empties the buffer for the next string, keeping its storage.
    mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        length = 0
        trimmedLength = 0
        problem = nil
    }

    /// Adds one decoded byte.
    mutating func append(_ byte: UInt8) {
        guard keeps else { return }
        let isWhitespace = Self.isWhitespace(byte)
        if length == 0, isWhitespace { return }
        length += 1
        if !isWhitespace { trimmedLength = length }
        if bytes.count < limit { bytes.append(byte) }
    }

    /// Adds decoded bytes; the same as appending them one by one, done a run at a time.
    mutating func append(contentsOf run: ArraySlice<UInt8>) {
        guard keeps else { return }
        var run = run
        if length == 0 {
            guard let first = run.firstIndex(where: { !Self.isWhitespace($0) }) else { return }
            run = run[first...]
        }
        if let last = run.lastIndex(where: { !Self.isWhitespace($0) }) {
            trimmedLength = length + run.distance(from: run.startIndex, to: last) + 1
        }
        length += run.count
        let room = limit - bytes.count
        if room > 0 { bytes.append(contentsOf: run.prefix(room)) }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// Adds a decoded character as UTF-8.
    mutating func append(_ scalar: Unicode.Scalar) {
        for byte in UTF8.encode(scalar)! { append(byte) }
    }

    /// The string gathered, trimmed, when it is whole (within the cap), valid UTF-8 and holds
    /// no lone surrogate; nil otherwise.
    var text: String? {
        guard trimmedLength <= limit, problem == nil else { return nil }
        return String(validating: bytes[..<trimmedLength], as: UTF8.self)
    }

    /// Whether the string is longer than the buffer keeps.
    var isOverLimit: Bool { trimmedLength > limit }

    /// The entry for the string gathered, which started at `line`.
    func entry(line: Int) -> LinkListEntry {
        if trimmedLength > ImageURL.maximumLength {
            return LinkListEntry(line: line, tooLong: trimmedLength, prefix: bytes)
        }
        // Within the cap every byte up to trimmedLength was kept.
        let trimmed = bytes[..<trimmedLength]
        if let problem {
            let shown = LinkListEntry.shown(trimmed)
            return LinkListEntry(line: line, text: shown, url: .failure(.malformed(shown, reason: problem)))
        }
        return LinkListEntry(line: line, candidate: trimmed)
    }
}

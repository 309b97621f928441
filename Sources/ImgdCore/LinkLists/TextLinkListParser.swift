/// Reads a text link list: one URL a line.
///
/// Blank lines and lines starting with `#` are skipped. A line that is not an http(s) URL, is not
/// UTF-8, or is longer than ``ImageURL/maximumLength`` (after trimming) becomes an entry carrying
/// the error. A line longer than the read buffer can hold is judged on its start and its length,
/// and the rest of it is skipped unread, so one bad line cannot make the reader hold a whole
/// file; the outcome is the same whatever the read size.
///
/// Comment lines before the first URL line form the header. A header line `# pin: 24h` (the key
/// in any case, the value as ``Swift/Duration/parsing(_:)`` reads it) sets ``pin``; a later one
/// overrides an earlier one, and after the first URL line such lines are ordinary comments.
/// `# refresh: 1d` (or `off`, `respect-headers`: ``RefreshRule``) sets ``refresh`` the same way,
/// and `# ready-by: 2026-12-07T05:30:00Z` (or `05:30`: ``ReadyBy``) sets ``readyBy``.
struct TextLinkListParser {
    /// The most bytes of one line the source must keep across a read: a line's content up to
    /// the cap, a byte order mark, and one byte more, to know a line is over the cap.
    static let carry = ImageURL.maximumLength + 4

    /// The `# pin:` header's duration, once the header has been read.
    private(set) var pin: Duration?
    /// The `# refresh:` header's rule, once the header has been read.
    private(set) var refresh: RefreshRule?
    /// The `# ready-by:` header's deadline, once the header has been read.
    private(set) var readyBy: ReadyBy?
    private var lineNumber = 0
    /// True until the first line that is not blank or a comment.
    private var inHeader = true
    /// True before the first byte of a line that is not a space or tab.
    private var atLineStart = true
    /// The line being skipped because it did not fit in the buffer.
    private var overlong: OverlongLine?
    /// How many of the available bytes are known to hold no newline, so a partial line is not
    /// searched again after every read (which would be quadratic with small reads).
    private var searched = 0

    /// What is kept of a line too long for the buffer while the rest of it is skipped: enough to
    /// report it, and to judge it if trailing whitespace brings it back under the cap.
    private struct OverlongLine {
        let line: Int
        /// A comment: nothing to report.
        let isComment: Bool
        /// The first bytes of the content, to show in the report.
        var shown: [UInt8]
        /// The first ``ImageURL/maximumLength`` bytes of the content, kept only while every byte
        /// after them is whitespace (a URL followed by thousands of spaces is still a URL).
        var kept: [UInt8]?
        /// Content bytes so far (after leading whitespace and a byte order mark).
        var length = 0
        /// How many of those are trailing whitespace so far.
        var trailingWhitespace = 0

        mutating func add(_ bytes: ArraySlice<UInt8>) {
            guard !isComment else { return }
            length += bytes.count
            if let last = bytes.lastIndex(where: { !TextLinkListParser.isTrimmed($0) }) {
                trailingWhitespace = bytes.endIndex - last - 1
                if length - trailingWhitespace > ImageURL.maximumLength { kept = nil }
            } else {
                trailingWhitespace += bytes.count
            }
        }

        /// The entry once the whole line has been seen; nil for a comment.
        func entry() -> LinkListEntry? {
            guard !isComment else { return nil }
            let trimmed = length - trailingWhitespace
            if trimmed > ImageURL.maximumLength || kept == nil {
                return LinkListEntry(line: line, tooLong: trimmed, prefix: shown)
            }
            return LinkListEntry(line: line, candidate: kept![..<trimmed])
        }
    }

    /// The next URL or bad line, or nil at the end of the file.
    mutating func next(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        while true {
            if let entry = try nextBuffered(from: &source) { return entry }
            if try source.fill() { continue }
            // The end of the file, and of its last line if it has no newline.
            if let line = overlong {
                overlong = nil
                if let entry = line.entry() { return entry }
            }
            guard let entry = try lastLine(from: &source) else { return nil }
            return entry
        }
    }

    /// The next entry among the buffered bytes, or nil when a read is needed first. Slices of the
    /// buffer live only inside this function, so none is alive when the source reads.
    private mutating func nextBuffered(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        while true {
            if atLineStart {
                // Leading spaces never count, so a line indented by more than the buffer holds
                // is still read.
                _ = source.consumeRun { $0 == 0x20 || $0 == 0x09 }
                guard !source.available.isEmpty else { return nil }
                atLineStart = false
            }
            let available = source.available
            if let newline = available.dropFirst(searched).firstIndex(of: 0x0A) {
                source.consume(upTo: newline + 1)
                atLineStart = true
                searched = 0
                if var line = overlong {
                    overlong = nil
                    line.add(available[..<newline])
                    if let entry = line.entry() { return entry }
                    continue
                }
                lineNumber += 1
                if let entry = try entry(for: available[..<newline], source: source) { return entry }
                continue
            }
            if overlong != nil {
                overlong!.add(available)
            } else if available.count >= Self.carry {
                try startOverlongLine(available, source: source)
            } else {
                searched = available.count
                return nil  // a partial line: read more
            }
            source.consume(upTo: available.endIndex)
            searched = 0
            return nil
        }
    }

    /// The last line of a file that does not end with a newline.
    private mutating func lastLine(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        let rest = source.available
        guard !rest.isEmpty else { return nil }
        source.consume(upTo: rest.endIndex)
        lineNumber += 1
        return try entry(for: rest, source: source)
    }

    /// Starts skipping a line that filled the buffer without ending; `bytes` is its start,
    /// leading whitespace already dropped.
    private mutating func startOverlongLine(_ bytes: ArraySlice<UInt8>, source: borrowing LinkListByteSource) throws(LinkListError) {
        lineNumber += 1
        var content = bytes
        if content.starts(with: Self.byteOrderMark) { content = content.dropFirst(3) }
        if content.first == UInt8(ascii: "#") {
            // A comment: judged as one, so a pin header this long is reported as bad.
            _ = try entry(for: bytes.prefix(Self.carry), source: source)
            overlong = OverlongLine(line: lineNumber, isComment: true, shown: [])
            return
        }
        inHeader = false
        var line = OverlongLine(
            line: lineNumber, isComment: false, shown: Array(content.prefix(LinkListEntry.shownLength)),
            kept: Array(content.prefix(ImageURL.maximumLength)))
        line.add(content)
        overlong = line
    }

    /// Judges one line: nil for blank lines and comments, which may set ``pin`` in the header.
    private mutating func entry(
        for rawLine: ArraySlice<UInt8>, source: borrowing LinkListByteSource
    ) throws(LinkListError) -> LinkListEntry? {
        var bytes = rawLine
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, Self.isTrimmed(last) { bytes.removeLast() }
        if bytes.starts(with: Self.byteOrderMark) { bytes.removeFirst(3) }
        guard let first = bytes.first else { return nil }
        if first == UInt8(ascii: "#") {
            if inHeader, let value = Self.pinValue(inComment: bytes.dropFirst()) {
                do {
                    pin = try Duration.parsing(value)
                } catch {
                    throw source.malformed("bad '# pin:' header: \(error)", line: lineNumber)
                }
            } else if inHeader, let value = Self.headerValue(named: "refresh", inComment: bytes.dropFirst()) {
                do {
                    refresh = try RefreshRule(parsing: value)
                } catch {
                    throw source.malformed("bad '# refresh:' header: \(error)", line: lineNumber)
                }
            } else if inHeader, let value = Self.headerValue(named: "ready-by", inComment: bytes.dropFirst()) {
                do {
                    readyBy = try ReadyBy(parsing: value)
                } catch {
                    throw source.malformed("bad '# ready-by:' header: \(error)", line: lineNumber)
                }
            }
            return nil
        }
        inHeader = false
        return LinkListEntry(line: lineNumber, candidate: bytes)
    }

    /// The value of a `pin: VALUE` comment (the text after `#`), trimmed, or nil for any other
    /// comment.
    static func pinValue(inComment comment: ArraySlice<UInt8>) -> String? {
        headerValue(named: "pin", inComment: comment)
    }

    /// The value of a `NAME: VALUE` comment (`name` lower-case ASCII, matched in any case),
    /// trimmed, or nil for any other comment.
    static func headerValue(named name: String, inComment comment: ArraySlice<UInt8>) -> String? {
        var bytes = comment
        let count = name.utf8.count
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        guard bytes.count >= count, bytes.prefix(count).map({ $0 | 0x20 }).elementsEqual(name.utf8) else { return nil }
        bytes.removeFirst(count)
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        guard bytes.first == UInt8(ascii: ":") else { return nil }
        bytes.removeFirst()
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes trimmed from the end of a line: spaces, tabs and the CR of a CRLF.
    static func isTrimmed(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D }

    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]
}

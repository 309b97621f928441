/// One URL of a link list, or the reason an item of the list is not one.
public struct LinkListEntry: Sendable {
    /// 1-based line number in the file: the line of a text list, or the line where a JSON
    /// string or plist element starts.
    public let line: Int
    /// The URL as written (decoded, for JSON and plist), trimmed; cut to its first 200 bytes for
    /// an item that is over-long, not UTF-8, or not a string.
    public let text: String
    /// The parsed URL, or why the item was rejected.
    public let url: Result<ImageURL, ImageURLError>
    /// What an object item says besides its URL (none for a string or a text line).
    public internal(set) var options = LinkListItemOptions.none
    /// Set for a child of a sitemap index (`<sitemap><loc>`): a sitemap to fetch and read as
    /// part of the list, not an image.
    public internal(set) var isSitemap = false
}

extension LinkListEntry {
    /// How many bytes of an over-long or undecodable item `text` keeps: enough to find it in
    /// the file, not so much that a report line becomes a wall of text.
    static let shownLength = 200

    /// The entry for a candidate URL whose surrounding whitespace is already trimmed: too long,
    /// not UTF-8, or whatever ``ImageURL`` makes of it. Every format ends up here, so the rules
    /// for a URL are the same whichever way the list is written.
    init(line: Int, candidate bytes: ArraySlice<UInt8>) {
        if bytes.count > ImageURL.maximumLength {
            self.init(line: line, tooLong: bytes.count, prefix: bytes)
            return
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            let shown = Self.shown(bytes)
            self.init(line: line, text: shown, url: .failure(.malformed(shown, reason: "not valid UTF-8")))
            return
        }
        do {
            self.init(line: line, text: text, url: .success(try ImageURL(text)))
        } catch {
            self.init(line: line, text: text, url: .failure(error))
        }
    }

    /// The entry for an item `length` bytes long of which only the start, `prefix`, was kept.
    init(line: Int, tooLong length: Int, prefix: some Collection<UInt8>) {
        self.init(
            line: line, text: Self.shown(prefix),
            url: .failure(.tooLong(length: length, limit: ImageURL.maximumLength)))
    }

    /// The entry for an item that is not a string at all (a JSON number, a plist `<dict>`).
    ///
    /// It reuses ``ImageURLError/malformed(_:reason:)`` rather than adding a case: to the
    /// caller it is one more thing in the list that is not a URL, reported and skipped like
    /// the others, and every `switch` over ``ImageURLError`` keeps compiling.
    init(line: Int, notAString kind: String, shown bytes: some Collection<UInt8>) {
        let shown = Self.shown(bytes)
        self.init(line: line, text: shown, url: .failure(.malformed(shown, reason: "not a string but \(kind)")))
    }

    /// At most ``shownLength`` bytes of `bytes` as text; a character cut in half or a bad byte
    /// shows as U+FFFD.
    static func shown(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes.prefix(shownLength), as: UTF8.self)
    }
}

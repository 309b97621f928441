import ImgdBase

/// Reads a JSON link list, an array of URL strings and item objects, one element at a time
/// (RFC 8259 syntax).
///
/// Each string becomes an entry, decoded (all escapes, surrogate pairs joined), trimmed, and
/// judged like a line of a text list; its line is where the string starts. A string longer than
/// ``ImageURL/maximumLength`` is reported and skipped without being held whole. An object is an
/// item with options: its `url` is judged like a string, its `key`, `sha256`, `pin`,
/// `priority` and `mirrors` (an array of URL strings) become ``LinkListItemOptions`` (a bad one
/// makes the item an entry with the reason), other members are skipped unread. Any other value (number, array, `true`,
/// `false`, `null`) becomes an entry saying it is not a string, and is skipped whole, nested
/// containers included, down to ``maximumNesting`` levels.
///
/// The array may instead be the `urls` member of a wrapper object, `{"ready_by": "…", "urls": [...]}`,
/// whose `ready_by` (``ReadyBy``, in either order) sets ``readyBy``; any other member of the
/// wrapper, a bad `ready_by`, or a wrapper without `urls` is malformed: a deadline mistyped is
/// said, not dropped.
///
/// Broken syntax throws ``LinkListError/malformed(path:line:reason:)``: a top level that is not
/// an array or a wrapper object, a missing comma, an unterminated string, anything after the array, invalid UTF-8.
/// The check is lazy: a missing comma after an element is found by the call after the one that
/// returned the element, so every entry before a syntax error is returned first.
struct JSONLinkListParser {
    /// The deepest nesting of arrays and objects inside one element of the list; deeper input
    /// is refused rather than followed, since skipping it recurses.
    static let maximumNesting = 64

    private enum State {
        /// Before the opening `[`.
        case start
        /// After `[` (`first`) or a comma: a value must follow (or `]` when `first`).
        case beforeElement(first: Bool)
        /// After an element: `,` or `]` must follow.
        case afterElement
        /// Inside the wrapper object, where a member's name must come (`first`: or its `}`).
        case wrapperMember(first: Bool)
        /// After a member of the wrapper object (the `urls` array's `]` included): `,` or `}`.
        case afterWrapperMember
        /// After the closing `]` (or the wrapper's `}`): only whitespace may follow.
        case afterArray
        case finished
    }

    private var state = State.start
    /// Whether the array is the `urls` of a wrapper object, and whether that member was read.
    private var isWrapped = false
    private var sawURLs = false
    /// The wrapper object's `ready_by`, once read.
    private(set) var readyBy: ReadyBy?
    private var string = LinkListStringBuffer()
    /// An object member's name, and an option's value (the URL goes to `string`).
    private var member = LinkListStringBuffer(limit: 64)
    private var value = LinkListStringBuffer(limit: LinkListItemOptions.maximumValueBytes)

    /// Bytes held besides the source's buffer.
    var scratchCapacity: Int { string.capacity + member.capacity + value.capacity }

    /// The next entry, or nil after the closing `]`.
    mutating func next(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        while true {
            switch state {
            case .start:
                try Self.skipByteOrderMark(&source)
                try Self.skipWhitespace(&source)
                guard let byte = try source.peek() else {
                    throw source.malformed("the file is empty: expected a JSON array of URL strings")
                }
                if byte == UInt8(ascii: "{") {
                    _ = try source.next()
                    isWrapped = true
                    state = .wrapperMember(first: true)
                    continue
                }
                guard byte == UInt8(ascii: "[") else {
                    throw source.malformed(
                        "expected '[' (a JSON link list is an array of URL strings, or an object with \"urls\"), found \(LinkListByteSource.describe(byte))")
                }
                _ = try source.next()
                state = .beforeElement(first: true)
            case .wrapperMember(let first):
                try wrapperMember(first: first, from: &source)
            case .afterWrapperMember:
                try Self.skipWhitespace(&source)
                switch try source.next() {
                case UInt8(ascii: ","):
                    state = .wrapperMember(first: false)
                case UInt8(ascii: "}"):
                    guard sawURLs else { throw source.malformed("the list's object has no \"urls\" array (it takes \"ready_by\" and \"urls\")") }
                    state = .afterArray
                case let byte:
                    throw source.malformed("expected ',' or '}' in the list's object, found \(LinkListByteSource.describe(byte))")
                }
            case .beforeElement(let first):
                try Self.skipWhitespace(&source)
                guard let byte = try source.peek() else {
                    throw source.malformed("the file ends inside the array: expected a value or ']'")
                }
                if byte == UInt8(ascii: "]") {
                    guard first else { throw source.malformed("expected a value after ',', found ']'") }
                    _ = try source.next()
                    state = isWrapped ? .afterWrapperMember : .afterArray
                    continue
                }
                state = .afterElement
                return try element(startingWith: byte, from: &source)
            case .afterElement:
                try Self.skipWhitespace(&source)
                guard let byte = try source.next() else {
                    throw source.malformed("the file ends inside the array: expected ',' or ']'")
                }
                switch byte {
                case UInt8(ascii: ","): state = .beforeElement(first: false)
                case UInt8(ascii: "]"): state = isWrapped ? .afterWrapperMember : .afterArray
                default: throw source.malformed("expected ',' or ']' after an element, found \(LinkListByteSource.describe(byte))")
                }
            case .afterArray:
                try Self.skipWhitespace(&source)
                if let byte = try source.peek() {
                    throw source.malformed("unexpected \(LinkListByteSource.describe(byte)) after the end of the \(isWrapped ? "list's object" : "array")")
                }
                state = .finished
            case .finished:
                return nil
            }
        }
    }

    /// Reads one member of the wrapper object: `ready_by` (kept in ``readyBy``), or the start of
    /// `urls` (the array's elements follow as the list's); anything else is malformed.
    private mutating func wrapperMember(first: Bool, from source: inout LinkListByteSource) throws(LinkListError) {
        try Self.skipWhitespace(&source)
        if first, try source.peek() == UInt8(ascii: "}") {
            throw source.malformed("the list's object is empty: it needs a \"urls\" array (and may have \"ready_by\")")
        }
        guard try source.peek() == UInt8(ascii: "\"") else {
            throw source.malformed("expected a string key in the list's object, found \(LinkListByteSource.describe(try source.peek()))")
        }
        member.reset()
        try Self.scanString(from: &source, into: &member)
        let name = member.text
        try Self.skipWhitespace(&source)
        guard try source.next() == UInt8(ascii: ":") else { throw source.malformed("expected ':' after a key in the list's object") }
        try Self.skipWhitespace(&source)
        switch name {
        case "urls":
            guard !sawURLs else { throw source.malformed("the list's object has \"urls\" twice") }
            guard try source.peek() == UInt8(ascii: "[") else {
                throw source.malformed("\"urls\" must be an array of URL strings and objects, found \(LinkListByteSource.describe(try source.peek()))")
            }
            _ = try source.next()
            sawURLs = true
            state = .beforeElement(first: true)
        case "ready_by":
            guard readyBy == nil else { throw source.malformed("the list's object has \"ready_by\" twice") }
            guard try source.peek() == UInt8(ascii: "\"") else {
                throw source.malformed("bad ready_by: not a string such as \"2026-12-07T05:30:00Z\" or \"05:30\"")
            }
            value.reset()
            try Self.scanString(from: &source, into: &value)
            guard let text = value.text else { throw source.malformed("bad ready_by: not a short UTF-8 string") }
            do {
                readyBy = try ReadyBy(parsing: text)
            } catch {
                throw source.malformed("bad ready_by: \(error)")
            }
            state = .afterWrapperMember
        default:
            let shown = name.map { EchoedText.escape($0, limit: 64) } ?? "(not UTF-8, or over 64 bytes)"
            throw source.malformed("unknown member \"\(shown)\" in the list's object: it takes \"ready_by\" and \"urls\"")
        }
    }

    /// One element of the list: a string's entry, or an entry saying the value is not a string.
    private mutating func element(
        startingWith byte: UInt8, from source: inout LinkListByteSource
    ) throws(LinkListError) -> LinkListEntry {
        let line = source.line
        if byte == UInt8(ascii: "\"") {
            string.reset()
            try Self.scanString(from: &source, into: &string)
            return string.entry(line: line)
        }
        if byte == UInt8(ascii: "{") { return try object(from: &source) }
        let kind: String
        switch byte {
        case UInt8(ascii: "{"): kind = "a JSON object"
        case UInt8(ascii: "["): kind = "a JSON array"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): kind = "a JSON boolean"
        case UInt8(ascii: "n"): kind = "JSON null"
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): kind = "a JSON number"
        default: throw source.malformed("expected a string, found \(LinkListByteSource.describe(byte))")
        }
        source.beginCapture()
        try Self.skipValue(from: &source, depth: 0)
        return LinkListEntry(line: line, notAString: kind, shown: source.endCapture())
    }

    /// An object item: its `url`, with the options its other known members give. Members are
    /// read in any order; a repeated one counts once more (the last wins), as most JSON
    /// readers do.
    private mutating func object(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry {
        let line = source.line
        source.beginCapture()
        _ = try source.next()  // {
        var urlEntry: LinkListEntry?
        var options = LinkListItemOptions()
        var problem: String?
        try Self.skipWhitespace(&source)
        if try source.peek() == UInt8(ascii: "}") {
            _ = try source.next()
        } else {
            while true {
                try Self.skipWhitespace(&source)
                guard try source.peek() == UInt8(ascii: "\"") else {
                    throw source.malformed("expected a string key in an object, found \(LinkListByteSource.describe(try source.peek()))")
                }
                member.reset()
                try Self.scanString(from: &source, into: &member)
                let name = member.text
                try Self.skipWhitespace(&source)
                guard try source.next() == UInt8(ascii: ":") else { throw source.malformed("expected ':' after a key in an object") }
                try Self.skipWhitespace(&source)
                if name == "mirrors" {
                    if let reason = try mirrors(from: &source, into: &options), problem == nil { problem = reason }
                } else if let name, LinkListItemOptions.fields.contains(name) {
                    guard try source.peek() == UInt8(ascii: "\"") else {
                        if problem == nil { problem = "\(name) is not a string" }
                        try Self.skipValue(from: &source, depth: 1)
                        if try endOfMember(&source) { break }
                        continue
                    }
                    if name == "url" {
                        string.reset()
                        try Self.scanString(from: &source, into: &string)
                        urlEntry = string.entry(line: line)
                    } else {
                        value.reset()
                        try Self.scanString(from: &source, into: &value)
                        do {
                            guard let text = value.text else {
                                let reason = value.isOverLimit ? "longer than \(LinkListItemOptions.maximumValueBytes) bytes" : "not valid UTF-8 text"
                                throw LinkListItemError(field: name, reason: reason)
                            }
                            try options.set(name, to: text)
                        } catch {
                            if problem == nil { problem = "\(error)" }
                        }
                    }
                } else {
                    try Self.skipValue(from: &source, depth: 1)
                }
                if try endOfMember(&source) { break }
            }
        }
        let shown = source.endCapture()
        guard let urlEntry else {
            return LinkListEntry(line: line, text: LinkListEntry.shown(shown), url: .failure(.malformed(LinkListEntry.shown(shown), reason: "an object item without a \"url\" string")))
        }
        if let problem {
            return LinkListEntry(line: line, text: urlEntry.text, url: .failure(.malformed(urlEntry.text, reason: problem)))
        }
        var entry = urlEntry
        entry.options = options
        return entry
    }

    /// An object item's `mirrors`: an array of URL strings, each judged like the item's `url`,
    /// added to `options` (at most ``LinkListItemOptions/maximumMirrors``). Returns why the
    /// member cannot be used (naming the mirror), or nil; the value is read to its end either way.
    private mutating func mirrors(
        from source: inout LinkListByteSource, into options: inout LinkListItemOptions
    ) throws(LinkListError) -> String? {
        guard try source.peek() == UInt8(ascii: "[") else {
            try Self.skipValue(from: &source, depth: 1)
            return "bad mirrors: not an array of URL strings"
        }
        _ = try source.next()  // [
        var problem: String?
        var index = 0
        try Self.skipWhitespace(&source)
        if try source.peek() == UInt8(ascii: "]") {
            _ = try source.next()
            return nil
        }
        while true {
            try Self.skipWhitespace(&source)
            if try source.peek() == UInt8(ascii: "\"") {
                string.reset()
                try Self.scanString(from: &source, into: &string)
                let entry = string.entry(line: source.line)
                if problem == nil {
                    switch entry.url {
                    case .success:
                        do {
                            try options.addMirror(entry.text, index: index)
                        } catch {
                            problem = "\(error)"
                        }
                    case .failure(let error):
                        problem = "bad mirrors: mirror \(index + 1) '\(EchoedText.cut(entry.text, limit: 200))': \(error)"
                    }
                }
            } else {
                try Self.skipValue(from: &source, depth: 2)
                if problem == nil { problem = "bad mirrors: mirror \(index + 1) is not a string" }
            }
            index += 1
            try Self.skipWhitespace(&source)
            switch try source.next() {
            case UInt8(ascii: "]"): return problem
            case UInt8(ascii: ","): continue
            case let byte: throw source.malformed("expected ',' or ']' in mirrors, found \(LinkListByteSource.describe(byte))")
            }
        }
    }

    /// After a member's value: true at the object's closing `}`, false after a `,`.
    private func endOfMember(_ source: inout LinkListByteSource) throws(LinkListError) -> Bool {
        try Self.skipWhitespace(&source)
        switch try source.next() {
        case UInt8(ascii: "}"): return true
        case UInt8(ascii: ","): return false
        case let byte: throw source.malformed("expected ',' or '}' in an object, found \(LinkListByteSource.describe(byte))")
        }
    }

    // MARK: Strings

    /// Reads a string from its opening quote to its closing one, decoding it into `sink` (a
    /// discarding one for a string inside a skipped value, which is only checked).
    ///
    /// A lone UTF-16 surrogate is valid JSON syntax but no character, so it spoils only its own
    /// string (an entry with the reason), not the list.
    private static func scanString(
        from source: inout LinkListByteSource, into sink: inout LinkListStringBuffer
    ) throws(LinkListError) {
        let startLine = source.line
        _ = try source.next()  // the opening quote
        /// A high surrogate waiting for its low half.
        var pendingHigh: UInt16?
        func loneSurrogate(_ unit: UInt16, in sink: inout LinkListStringBuffer) {
            if sink.problem == nil {
                sink.problem = "the string holds a lone UTF-16 surrogate (\\u\(String(unit, radix: 16, uppercase: true)))"
            }
        }
        while true {
            if appendPlainRun(from: &source, into: &sink), let high = pendingHigh {
                loneSurrogate(high, in: &sink)
                pendingHigh = nil
            }
            guard let byte = try source.next() else {
                throw source.malformed("unterminated string: the file ends before its closing quote", line: startLine)
            }
            if byte == UInt8(ascii: "\"") {
                if let high = pendingHigh { loneSurrogate(high, in: &sink) }
                return
            }
            if byte == 0x0A {
                throw source.malformed(
                    "line break inside a string: is its closing quote missing? (a line break in a string is written \\n)",
                    line: source.line - 1)
            }
            if byte < 0x20 {
                throw source.malformed(
                    "control character U+\(LinkListByteSource.hex4(byte)) inside a string: write it as an escape (\\t, \\u00XX)")
            }
            guard byte == UInt8(ascii: "\\") else {
                if let high = pendingHigh {
                    loneSurrogate(high, in: &sink)
                    pendingHigh = nil
                }
                sink.append(byte)
                continue
            }
            guard let escape = try source.next() else {
                throw source.malformed("unterminated string: the file ends before its closing quote", line: startLine)
            }
            let decoded: UInt8
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded = escape
            case UInt8(ascii: "b"): decoded = 0x08
            case UInt8(ascii: "f"): decoded = 0x0C
            case UInt8(ascii: "n"): decoded = 0x0A
            case UInt8(ascii: "r"): decoded = 0x0D
            case UInt8(ascii: "t"): decoded = 0x09
            case UInt8(ascii: "u"):
                let unit = try readHex4(from: &source)
                switch unit {
                case 0xD800...0xDBFF:
                    if let high = pendingHigh { loneSurrogate(high, in: &sink) }
                    pendingHigh = unit
                case 0xDC00...0xDFFF:
                    if let high = pendingHigh {
                        let value = 0x10000 + ((UInt32(high) - 0xD800) << 10) + (UInt32(unit) - 0xDC00)
                        sink.append(Unicode.Scalar(value)!)
                        pendingHigh = nil
                    } else {
                        loneSurrogate(unit, in: &sink)
                    }
                default:
                    if let high = pendingHigh {
                        loneSurrogate(high, in: &sink)
                        pendingHigh = nil
                    }
                    sink.append(Unicode.Scalar(unit)!)
                }
                continue
            default:
                throw source.malformed("invalid escape '\\\(describeCharacter(escape))' in a string")
            }
            if let high = pendingHigh {
                loneSurrogate(high, in: &sink)
                pendingHigh = nil
            }
            sink.append(decoded)
        }
    }

    /// Appends the buffered run of bytes that stand for themselves (no quote, backslash or
    /// control character); true if there was one. A function of its own so that the run, a
    /// slice of the source's buffer, is gone before the source next reads into that buffer.
    private static func appendPlainRun(
        from source: inout LinkListByteSource, into sink: inout LinkListStringBuffer
    ) -> Bool {
        let run = source.consumeRun { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        sink.append(contentsOf: run)
        return !run.isEmpty
    }

    /// The four hex digits of a `\u` escape.
    private static func readHex4(from source: inout LinkListByteSource) throws(LinkListError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = try source.next(), let digit = LinkListByteSource.hexValue(byte) else {
                throw source.malformed("invalid \\u escape: expected four hex digits")
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    // MARK: Skipping values

    /// Skips one value of any kind, checking its syntax. `depth` counts the containers around it
    /// within the current element.
    private static func skipValue(from source: inout LinkListByteSource, depth: Int) throws(LinkListError) {
        guard let byte = try source.peek() else {
            throw source.malformed("the file ends where a value was expected")
        }
        switch byte {
        case UInt8(ascii: "\""):
            var discard = LinkListStringBuffer.discarding
            try scanString(from: &source, into: &discard)
        case UInt8(ascii: "["), UInt8(ascii: "{"):
            guard depth < maximumNesting else {
                throw source.malformed("arrays and objects nested more than \(maximumNesting) deep")
            }
            try skipContainer(from: &source, depth: depth + 1)
        case UInt8(ascii: "t"): try expectLiteral("true", from: &source)
        case UInt8(ascii: "f"): try expectLiteral("false", from: &source)
        case UInt8(ascii: "n"): try expectLiteral("null", from: &source)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try skipNumber(from: &source)
        default: throw source.malformed("expected a value, found \(LinkListByteSource.describe(byte))")
        }
    }

    /// Skips an array or an object, from its opening bracket to its closing one.
    private static func skipContainer(from source: inout LinkListByteSource, depth: Int) throws(LinkListError) {
        let isObject = try source.next() == UInt8(ascii: "{")
        let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
        try skipWhitespace(&source)
        if try source.peek() == close {
            _ = try source.next()
            return
        }
        while true {
            try skipWhitespace(&source)
            if isObject {
                let keyStart = try source.peek()
                guard keyStart == UInt8(ascii: "\"") else {
                    throw source.malformed("expected a string key in an object, found \(LinkListByteSource.describe(keyStart))")
                }
                try skipValue(from: &source, depth: depth)
                try skipWhitespace(&source)
                guard try source.next() == UInt8(ascii: ":") else {
                    throw source.malformed("expected ':' after a key in an object")
                }
                try skipWhitespace(&source)
            }
            try skipValue(from: &source, depth: depth)
            try skipWhitespace(&source)
            let byte = try source.next()
            if byte == close { return }
            guard byte == UInt8(ascii: ",") else {
                let container = isObject ? "an object" : "an array"
                let found = LinkListByteSource.describe(byte)
                throw source.malformed("expected ',' or '\(Character(Unicode.Scalar(close)))' in \(container), found \(found)")
            }
        }
    }

    private static func expectLiteral(_ literal: StaticString, from source: inout LinkListByteSource) throws(LinkListError) {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for byte in expected {
            guard try source.next() == byte else {
                throw source.malformed("invalid literal: expected '\(literal)'")
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, checked as it is skipped.
    private static func skipNumber(from source: inout LinkListByteSource) throws(LinkListError) {
        func isDigit(_ byte: UInt8?) -> Bool { byte.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false }
        func digits(_ source: inout LinkListByteSource) throws(LinkListError) {
            guard isDigit(try source.peek()) else { throw source.malformed("invalid number: expected a digit") }
            while isDigit(try source.peek()) { _ = try source.next() }
        }
        if try source.peek() == UInt8(ascii: "-") { _ = try source.next() }
        if try source.peek() == UInt8(ascii: "0") {
            _ = try source.next()
        } else {
            try digits(&source)
        }
        if try source.peek() == UInt8(ascii: ".") {
            _ = try source.next()
            try digits(&source)
        }
        if let byte = try source.peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            _ = try source.next()
            if let sign = try source.peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                _ = try source.next()
            }
            try digits(&source)
        }
    }

    // MARK: Helpers

    private static func skipWhitespace(_ source: inout LinkListByteSource) throws(LinkListError) {
        while true {
            _ = source.consumeRun(while: isWhitespace)
            // Out of buffered whitespace: the next byte decides, after a read if need be.
            guard let byte = try source.peek(), isWhitespace(byte) else { return }
        }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// JSON forbids a byte order mark, but editors on Windows write one; it carries no meaning.
    private static func skipByteOrderMark(_ source: inout LinkListByteSource) throws(LinkListError) {
        guard try source.peek() == 0xEF else { return }
        for expected: UInt8 in [0xEF, 0xBB, 0xBF] {
            guard try source.next() == expected else {
                throw source.malformed("expected '[' (a JSON link list is an array of URL strings), found a non-ASCII character")
            }
        }
    }

    private static func describeCharacter(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? String(Character(Unicode.Scalar(byte))) : "U+\(LinkListByteSource.hex4(byte))"
    }
}

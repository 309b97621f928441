/// Reads an XML property list link list, `<plist><array><string>URL</string>…</array></plist>`,
/// one element at a time.
///
/// Before `<plist>` may come an XML declaration, a `<!DOCTYPE …>`, comments and whitespace.
/// Each `<string>` of the array becomes an entry, judged like a line of a text list; its line is
/// where the `<string>` tag starts. Text in a string may use the five XML entities, character
/// references (`&#65;`, `&#x41;`), CDATA sections and comments; `<string/>` is an empty string.
/// Any other element in the array (`<integer>`, `<true/>`, `<dict>…</dict>`, …) becomes an entry
/// saying it is not a string, and is skipped whole, down to ``maximumNesting`` levels.
///
/// Broken syntax throws ``LinkListError/malformed(path:line:reason:)`` with the line: a tag
/// that does not close, a mismatched end tag, an unknown entity, a name outside the plist DTD,
/// anything after `</plist>`, invalid UTF-8. A binary plist (`bplist00…`) is refused with a
/// reason saying to convert it to XML. Like the JSON reader, it checks lazily, so every entry
/// before a syntax error is returned first.
struct PlistLinkListParser {
    /// The deepest nesting of elements inside one element of the array; deeper input is refused
    /// rather than followed, since skipping it recurses.
    static let maximumNesting = 64

    private enum State {
        /// Nothing read yet: check for a binary plist and a byte order mark.
        case start
        /// Before `<plist>`.
        case prolog
        /// After `<plist>`, before `<array>`.
        case inPlist
        /// Between the elements of the array.
        case inArray
        /// After `</array>`, before `</plist>`.
        case afterArray
        /// After `</plist>`: only whitespace, comments and processing instructions may follow.
        case epilog
        case finished
    }

    /// A piece of markup, read after its `<`.
    private enum Markup {
        case start(PlistElement, selfClosing: Bool)
        case end(PlistElement)
        /// `<![CDATA[`, read; its content comes next.
        case cdata
        /// `<!DOCTYPE …>`, skipped.
        case doctype
        /// A comment or processing instruction (the XML declaration is one), skipped.
        case ignorable
    }

    private var state = State.start
    private var string = LinkListStringBuffer()
    /// The name of the tag or entity being read, at most a few bytes (names are capped).
    private var name: [UInt8]

    /// What an unknown entity's error says a plist may use.
    private static let knownEntities = "a plist knows &amp; &lt; &gt; &quot; &apos; and &#…;"
    /// Where skipped CDATA goes.
    private var discarded = LinkListStringBuffer.discarding

    init() {
        name = []
        name.reserveCapacity(XMLLexer.longestEntity)
    }

    /// A parser whose `<plist>` start tag was read already (by the `.xml` reader, which found
    /// the document's root to be a plist): it goes on from inside that element.
    static func afterPlistTag() -> PlistLinkListParser {
        var parser = PlistLinkListParser()
        parser.state = .inPlist
        return parser
    }

    /// Bytes held besides the source's buffer.
    var scratchCapacity: Int { string.capacity + name.capacity }

    /// The next entry, or nil after `</plist>`.
    mutating func next(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        while true {
            switch state {
            case .start:
                try Self.checkStart(&source)
                state = .prolog
            case .prolog:
                try XMLLexer.skipWhitespace(&source)
                guard let byte = try source.next() else {
                    throw source.malformed("no <plist> element: expected an XML property list holding an <array> of URL strings")
                }
                guard byte == UInt8(ascii: "<") else {
                    throw source.malformed("expected '<' of the <plist> element, found \(LinkListByteSource.describe(byte))")
                }
                switch try readMarkup(&source) {
                case .ignorable, .doctype:
                    continue
                case .start(.plist, let selfClosing):
                    guard !selfClosing else { throw source.malformed("<plist/> is empty: expected an <array> of URL strings") }
                    state = .inPlist
                case .start(let element, _):
                    throw source.malformed("the root element must be <plist>, found \(element.tag)")
                case .end(let element):
                    throw source.malformed("</\(element.rawValue)> closes an element that is not open")
                case .cdata:
                    throw source.malformed("CDATA section outside any element")
                }
            case .inPlist:
                switch try nextMarkup(&source, where: "inside <plist>") {
                case .start(.array, let selfClosing):
                    state = selfClosing ? .afterArray : .inArray
                case .start(let element, _):
                    throw source.malformed("<plist> must hold an <array> of URL strings, found \(element.tag)")
                case .end(.plist):
                    throw source.malformed("<plist> holds no <array> of URL strings")
                case let markup:
                    throw unexpected(markup, expected: "<array>", source: source)
                }
            case .inArray:
                try XMLLexer.skipWhitespace(&source)
                let line = source.line
                guard let byte = try source.next() else {
                    throw source.malformed("the file ends inside the <array>: expected </array>")
                }
                guard byte == UInt8(ascii: "<") else {
                    throw source.malformed("text between the elements of the <array>: put each URL in a <string> element")
                }
                switch try readMarkup(&source) {
                case .ignorable:
                    continue
                case .start(.string, let selfClosing):
                    string.reset()
                    if !selfClosing { try readString(&source, startLine: line) }
                    return string.entry(line: line)
                case .start(let element, let selfClosing):
                    source.beginCapture()
                    if !selfClosing { try skipContent(of: element, from: &source, depth: 1) }
                    let shown = Array("<\(element.rawValue)\(selfClosing ? "/" : "")>".utf8) + source.endCapture()
                    return LinkListEntry(line: line, notAString: element.tag, shown: shown)
                case .end(.array):
                    state = .afterArray
                case let markup:
                    throw unexpected(markup, expected: "<string> or </array>", source: source)
                }
            case .afterArray:
                switch try nextMarkup(&source, where: "after </array>") {
                case .end(.plist): state = .epilog
                case let markup: throw unexpected(markup, expected: "</plist>", source: source)
                }
            case .epilog:
                try XMLLexer.skipWhitespace(&source)
                guard let byte = try source.next() else {
                    state = .finished
                    continue
                }
                guard byte == UInt8(ascii: "<") else {
                    throw source.malformed("unexpected \(LinkListByteSource.describe(byte)) after </plist>")
                }
                guard case .ignorable = try readMarkup(&source) else {
                    throw source.malformed("unexpected markup after </plist>: a plist has one root element")
                }
            case .finished:
                return nil
            }
        }
    }

    // MARK: Content

    /// Reads the text of a `<string>` up to its `</string>` into ``string``.
    private mutating func readString(_ source: inout LinkListByteSource, startLine: Int) throws(LinkListError) {
        while true {
            appendPlainRun(from: &source)
            guard let byte = try source.next() else {
                throw source.malformed("unterminated <string>: the file ends before </string>", line: startLine)
            }
            switch byte {
            case UInt8(ascii: "<"):
                switch try readMarkup(&source) {
                case .end(.string): return
                case .cdata: try XMLLexer.readCDATA(&source, into: &string)
                case .ignorable: continue
                case .start(let element, _): throw source.malformed("element \(element.tag) inside a <string>")
                case let markup: throw unexpected(markup, expected: "</string>", source: source)
                }
            case UInt8(ascii: "&"):
                string.append(try XMLLexer.readEntity(&source, name: &name, known: Self.knownEntities))
            case 0x09, 0x0A, 0x0D:
                string.append(byte)
            case ..<0x20:
                throw source.malformed("control character U+\(LinkListByteSource.hex4(byte)) is not allowed in XML")
            default:
                string.append(byte)
            }
        }
    }

    /// Appends the buffered run of bytes that stand for themselves (no markup, entity or
    /// control character). A function of its own so that the run, a slice of the source's
    /// buffer, is gone before the source next reads into that buffer.
    private mutating func appendPlainRun(from source: inout LinkListByteSource) {
        string.append(contentsOf: source.consumeRun(while: XMLLexer.isPlainText))
    }

    /// Skips the content of `element` up to its end tag, checking that it is well-formed.
    private mutating func skipContent(
        of element: PlistElement, from source: inout LinkListByteSource, depth: Int
    ) throws(LinkListError) {
        let startLine = source.line
        while true {
            _ = source.consumeRun(while: XMLLexer.isPlainText)
            guard let byte = try source.next() else {
                throw source.malformed("unterminated \(element.tag): the file ends before </\(element.rawValue)>", line: startLine)
            }
            switch byte {
            case UInt8(ascii: "<"):
                switch try readMarkup(&source) {
                case .start(let inner, let selfClosing):
                    guard !selfClosing else { continue }
                    guard depth < Self.maximumNesting else {
                        throw source.malformed("elements nested more than \(Self.maximumNesting) deep")
                    }
                    try skipContent(of: inner, from: &source, depth: depth + 1)
                case .end(let closed):
                    guard closed == element else {
                        throw source.malformed("</\(closed.rawValue)> does not close \(element.tag)")
                    }
                    return
                case .cdata: try XMLLexer.readCDATA(&source, into: &discarded)
                case .ignorable: continue
                case .doctype: throw source.malformed("<!DOCTYPE> inside an element")
                }
            case UInt8(ascii: "&"):
                _ = try XMLLexer.readEntity(&source, name: &name, known: Self.knownEntities)
            default:
                continue
            }
        }
    }

    // MARK: Markup

    /// The next markup after whitespace, comments and processing instructions; text or the end
    /// of the file is an error.
    private mutating func nextMarkup(_ source: inout LinkListByteSource, where place: String) throws(LinkListError) -> Markup {
        while true {
            try XMLLexer.skipWhitespace(&source)
            guard let byte = try source.next() else {
                throw source.malformed("the file ends \(place)")
            }
            guard byte == UInt8(ascii: "<") else {
                throw source.malformed("unexpected \(LinkListByteSource.describe(byte)) \(place)")
            }
            let markup = try readMarkup(&source)
            if case .ignorable = markup { continue }
            return markup
        }
    }

    /// Reads the markup after a `<`: a tag (its attributes are checked and dropped), a comment,
    /// a processing instruction, a DOCTYPE, or the opening of a CDATA section.
    private mutating func readMarkup(_ source: inout LinkListByteSource) throws(LinkListError) -> Markup {
        let startLine = source.line
        guard let byte = try source.next() else { throw source.malformed("the file ends inside a tag") }
        switch byte {
        case UInt8(ascii: "?"):
            try XMLLexer.skip(through: "?>", what: "processing instruction", from: &source, startLine: startLine)
            return .ignorable
        case UInt8(ascii: "!"):
            let next = try source.next()
            if next == UInt8(ascii: "-"), try source.next() == UInt8(ascii: "-") {
                try XMLLexer.skip(through: "-->", what: "comment", from: &source, startLine: startLine)
                return .ignorable
            }
            if next == UInt8(ascii: "["), try XMLLexer.consume("CDATA[", from: &source) {
                return .cdata
            }
            if next == UInt8(ascii: "D"), try XMLLexer.consume("OCTYPE", from: &source) {
                try XMLLexer.skipDoctype(&source, startLine: startLine)
                return .doctype
            }
            throw source.malformed("unknown markup after '<!': expected a comment, CDATA section or DOCTYPE")
        case UInt8(ascii: "/"):
            let first = try source.next()
            let element = try readName(&source, first: first)
            try XMLLexer.skipWhitespace(&source)
            guard try source.next() == UInt8(ascii: ">") else {
                throw source.malformed("expected '>' to end </\(element.rawValue)")
            }
            return .end(element)
        default:
            let element = try readName(&source, first: byte)
            return .start(element, selfClosing: try Self.skipAttributes(of: element, from: &source))
        }
    }

    /// Reads an element name whose first byte, `first`, is already consumed.
    private mutating func readName(_ source: inout LinkListByteSource, first: UInt8?) throws(LinkListError) -> PlistElement {
        guard let first, XMLLexer.isNameStart(first) else {
            throw source.malformed("'<' must start a tag (write a literal '<' as &lt;)")
        }
        name.removeAll(keepingCapacity: true)
        name.append(first)
        var length = 1
        while let byte = try source.peek(), XMLLexer.isNameStart(byte) || XMLLexer.isNameDigit(byte) {
            _ = try source.next()
            length += 1
            if name.count <= PlistElement.longestName { name.append(byte) }
        }
        guard let element = PlistElement(name: name) else {
            let shown = String(decoding: name.prefix(PlistElement.longestName), as: UTF8.self)
                + (length > PlistElement.longestName ? "…" : "")
            throw source.malformed("unknown element <\(shown)>: a plist link list holds <plist>, <array> and <string>")
        }
        return element
    }

    /// Skips a start tag's attributes through its `>`; true when it ends `/>`.
    private static func skipAttributes(
        of element: PlistElement, from source: inout LinkListByteSource
    ) throws(LinkListError) -> Bool {
        let unterminated = "the file ends inside the \(element.tag) tag"
        while true {
            let spaced = try XMLLexer.skipWhitespace(&source)
            guard let byte = try source.next() else { throw source.malformed(unterminated) }
            if byte == UInt8(ascii: ">") { return false }
            if byte == UInt8(ascii: "/") {
                guard try source.next() == UInt8(ascii: ">") else {
                    throw source.malformed("expected '>' after '/' in the \(element.tag) tag")
                }
                return true
            }
            guard spaced, XMLLexer.isNameStart(byte) else {
                throw source.malformed("unexpected \(LinkListByteSource.describe(byte)) in the \(element.tag) tag")
            }
            while let next = try source.peek(), XMLLexer.isNameStart(next) || XMLLexer.isNameDigit(next) { _ = try source.next() }
            try XMLLexer.skipWhitespace(&source)
            guard try source.next() == UInt8(ascii: "=") else {
                throw source.malformed("expected '=' after an attribute name in the \(element.tag) tag")
            }
            try XMLLexer.skipWhitespace(&source)
            guard let quote = try source.next(), quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
                throw source.malformed("expected a quoted attribute value in the \(element.tag) tag")
            }
            while true {
                guard let value = try source.next() else { throw source.malformed(unterminated) }
                if value == quote { break }
                if value == UInt8(ascii: "<") {
                    throw source.malformed("'<' inside an attribute value of the \(element.tag) tag")
                }
            }
        }
    }

    /// A binary plist is refused with a reason saying what to do; a byte order mark is skipped.
    private static func checkStart(_ source: inout LinkListByteSource) throws(LinkListError) {
        if try source.peek() == UInt8(ascii: "b") {
            guard try XMLLexer.consume("bplist", from: &source) else {
                throw source.malformed("expected an XML property list starting with '<'", line: 1)
            }
            throw source.malformed(
                "binary property lists are not supported: save the list as an XML plist (plutil -convert xml1 FILE)",
                line: 1)
        }
        if try source.peek() == 0xEF {
            guard try XMLLexer.consume("\u{FEFF}", from: &source) else {
                throw source.malformed("expected an XML property list starting with '<'", line: 1)
            }
        }
    }

    private func unexpected(_ markup: Markup, expected: String, source: borrowing LinkListByteSource) -> LinkListError {
        let found =
            switch markup {
            case .start(let element, _): element.tag
            case .end(let element): "</\(element.rawValue)>"
            case .cdata: "a CDATA section"
            case .doctype: "<!DOCTYPE>"
            case .ignorable: "a comment"
            }
        return source.malformed("expected \(expected), found \(found)")
    }
}

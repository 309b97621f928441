/// What an XML sitemap is: a list of pages and their images, or a list of other sitemaps.
public enum SitemapKind: String, Sendable, Hashable {
    /// `<urlset>`: `<url><loc>` pages, each with its `<image:image><image:loc>` images.
    case urlset
    /// `<sitemapindex>`: `<sitemap><loc>` children, each a sitemap to fetch and read.
    case index
}

/// Reads an `.xml` link list, one element at a time: a sitemap (`<urlset>`), a sitemap index
/// (`<sitemapindex>`), or — when the root is `<plist>` — an XML property list, which it hands
/// to ``PlistLinkListParser`` (``handsOffToPlist``).
///
/// The document is recognised by its root element, in the sitemap namespace
/// (``sitemapNamespace``), bound by `xmlns` in the document; image elements are those of the
/// image namespace (``imageNamespace``) under whatever prefix the document binds it to.
/// - In a `<urlset>`, each `<url><image:image><image:loc>` is an entry, and so is each
///   `<url><loc>` whose path ends in an image extension (``imageExtensions``); the other page
///   locations are skipped and counted (``skippedPages``), they are not errors.
/// - In a `<sitemapindex>`, each `<sitemap><loc>` is an entry marked
///   ``LinkListEntry/isSitemap``: a child the caller fetches and reads as a list of its own.
/// - Every other element (`<lastmod>`, `<image:caption>`, elements of other namespaces) is
///   skipped, checked for well-formedness down to ``maximumNesting`` levels.
///
/// Text may use XML's five entities, character references and CDATA sections. No DTD is read:
/// a `<!DOCTYPE>` with an internal subset (where entities are declared) is refused, and a sitemap
/// has no DOCTYPE at all, so no entity can be declared, expanded or fetched (no XXE, no
/// "billion laughs"). Broken syntax throws ``LinkListError/malformed(path:line:reason:)`` after
/// every entry before it has been returned, as the other XML list does.
struct SitemapLinkListParser {
    /// The sitemap protocol's namespace, which the root element must be in.
    static let sitemapNamespace = "http://www.sitemaps.org/schemas/sitemap/0.9"
    /// Google's image sitemap extension: `<image:image><image:loc>`.
    static let imageNamespace = "http://www.google.com/schemas/sitemap-image/1.1"
    /// The path extensions that make a page location an image (compared without case).
    static let imageExtensions: Set<String> = [
        "png", "jpg", "jpeg", "gif", "webp", "avif", "heic", "heif", "bmp", "ico", "svg", "tif", "tiff",
    ]
    /// The deepest nesting of elements; deeper input is refused.
    static let maximumNesting = 64
    /// The longest element or attribute name (with its prefix), in bytes.
    static let longestName = 128
    /// Namespace declarations in force at once, at most.
    static let maximumBindings = 64
    /// The longest namespace URI kept (longer ones are some other namespace).
    static let longestNamespace = 256

    private enum State {
        case start
        case prolog
        case body
        case epilog
        case finished
        /// The root is `<plist>`: the caller goes on with ``PlistLinkListParser/afterPlistTag()``.
        case plist
    }

    /// A namespace this reader knows.
    private enum Namespace {
        case sitemap, image, other
    }

    /// What an open element is, by its place and name.
    private enum Role {
        case urlset, sitemapindex, url, sitemap, loc, imageImage, imageLoc, other
    }

    /// A start tag, read with its attributes.
    private struct Tag {
        var namespace: Namespace?
        var isPlist: Bool
        var local: Substring
        var selfClosing: Bool
    }

    private var state = State.start
    /// The open elements' roles, root first.
    private var roles: [Role] = []
    /// The open elements' qualified names, one after another; `nameEnds` marks where each ends.
    private var openNames: [UInt8] = []
    private var nameEnds: [Int] = []
    /// `xmlns` declarations in force: the depth of the element that made each, its prefix
    /// (empty for the default namespace), the namespace.
    private var bindings: [(depth: Int, prefix: [UInt8], namespace: Namespace)] = []
    private var string = LinkListStringBuffer()
    private var discarded = LinkListStringBuffer.discarding
    /// Scratch: the name being read.
    private var name: [UInt8] = []
    /// Scratch: an attribute's value.
    private var value: [UInt8] = []
    private var sawDoctype = false

    /// What the document is, once its root has been read (nil before, or for a plist).
    private(set) var kind: SitemapKind?
    /// Page locations (`<url><loc>`) that are not images, skipped.
    private(set) var skippedPages = 0

    private static let knownEntities =
        "a sitemap knows &amp; &lt; &gt; &quot; &apos; and &#…; (no DTD is read, so no other entity exists)"

    init() {
        name.reserveCapacity(Self.longestName)
    }

    /// Whether the root was `<plist>`: ``next(from:)`` returned nil and the rest is a plist's.
    var handsOffToPlist: Bool { if case .plist = state { true } else { false } }

    /// Bytes held besides the source's buffer.
    var scratchCapacity: Int { string.capacity + name.capacity + value.capacity + openNames.capacity }

    /// The next entry, or nil at the end of the document (or at a `<plist>` root).
    mutating func next(from source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        while true {
            switch state {
            case .start:
                try Self.checkStart(&source)
                state = .prolog
            case .prolog:
                try XMLLexer.skipWhitespace(&source)
                guard let byte = try source.next() else {
                    throw source.malformed("the file is empty: expected a sitemap (<urlset>), a sitemap index (<sitemapindex>) or a plist")
                }
                guard byte == UInt8(ascii: "<") else {
                    throw source.malformed("expected '<' of the root element, found \(LinkListByteSource.describe(byte))")
                }
                try readRoot(&source)
            case .body:
                if let entry = try readBody(&source) { return entry }
            case .epilog:
                try XMLLexer.skipWhitespace(&source)
                guard let byte = try source.next() else {
                    state = .finished
                    continue
                }
                guard byte == UInt8(ascii: "<") else {
                    throw source.malformed("unexpected \(LinkListByteSource.describe(byte)) after the root element")
                }
                guard try readMarkupOutsideTags(&source) == .ignorable else {
                    throw source.malformed("unexpected markup after the root element: an XML document has one root element")
                }
            case .finished, .plist:
                return nil
            }
        }
    }

    // MARK: The root

    private enum Other: Equatable {
        /// A comment or processing instruction.
        case ignorable
        case cdata
        case doctype(subset: Bool)
        /// `</`: an end tag follows.
        case endTag
        /// A start tag follows; its first byte is given.
        case startTag(UInt8)
    }

    /// Reads the markup of the prolog after a `<`, up to and including the root's start tag.
    private mutating func readRoot(_ source: inout LinkListByteSource) throws(LinkListError) {
        switch try readMarkupOutsideTags(&source) {
        case .ignorable:
            return
        case .doctype(let subset):
            guard !subset else {
                throw source.malformed(
                    "the <!DOCTYPE> declares an internal subset: DTDs are refused (no entity declarations, no external entities)")
            }
            sawDoctype = true
        case .cdata:
            throw source.malformed("CDATA section outside any element")
        case .endTag:
            throw source.malformed("an end tag before the root element")
        case .startTag(let first):
            let tag = try readStartTag(&source, first: first, depth: 1)
            if tag.isPlist {
                guard !tag.selfClosing else { throw source.malformed("<plist/> is empty: expected an <array> of URL strings") }
                state = .plist
                return
            }
            let found = String(decoding: name, as: UTF8.self)
            guard tag.namespace == .sitemap, tag.local == "urlset" || tag.local == "sitemapindex" else {
                let namespaceNote = tag.namespace == .sitemap ? "" : " (not in the sitemap namespace \(Self.sitemapNamespace))"
                throw source.malformed(
                    "the root element <\(found)>\(namespaceNote) is not a sitemap: an .xml list must be a <urlset> or <sitemapindex> in the sitemap namespace, or a <plist>")
            }
            guard !sawDoctype else {
                throw source.malformed("a sitemap must not have a <!DOCTYPE>: DTDs are refused")
            }
            kind = tag.local == "urlset" ? .urlset : .index
            if tag.selfClosing {
                state = .epilog
            } else {
                push(tag.local == "urlset" ? .urlset : .sitemapindex)
                state = .body
            }
        }
    }

    // MARK: The body

    /// Reads on until an entry, or the root's end (nil).
    private mutating func readBody(_ source: inout LinkListByteSource) throws(LinkListError) -> LinkListEntry? {
        while true {
            _ = source.consumeRun(while: XMLLexer.isPlainText)
            guard let byte = try source.next() else {
                throw source.malformed("the file ends inside <\(openName(roles.count - 1))>: expected its end tag")
            }
            switch byte {
            case UInt8(ascii: "&"):
                _ = try XMLLexer.readEntity(&source, name: &name, known: Self.knownEntities)
                continue
            case UInt8(ascii: "<"):
                break
            case 0x09, 0x0A, 0x0D:
                continue
            case ..<0x20:
                throw source.malformed("control character U+\(LinkListByteSource.hex4(byte)) is not allowed in XML")
            default:
                continue
            }
            let line = source.line
            switch try readMarkupOutsideTags(&source) {
            case .ignorable: continue
            case .cdata: try XMLLexer.readCDATA(&source, into: &discarded)
            case .doctype: throw source.malformed("<!DOCTYPE> inside an element")
            case .endTag:
                try readEndTag(&source)
                if roles.isEmpty {
                    state = .epilog
                    return nil
                }
            case .startTag(let first):
                let depth = roles.count + 1
                guard depth <= Self.maximumNesting else {
                    throw source.malformed("elements nested more than \(Self.maximumNesting) deep")
                }
                let tag = try readStartTag(&source, first: first, depth: depth)
                let role = Self.role(of: tag, in: roles.last!)
                switch role {
                case .loc, .imageLoc:
                    let parent = roles.last!
                    string.reset()
                    if tag.selfClosing {
                        dropBindings(from: depth)
                    } else {
                        push(role)
                        try readText(&source, startLine: line)
                    }
                    if parent == .sitemap {
                        var entry = string.entry(line: line)
                        entry.isSitemap = true
                        return entry
                    }
                    if role == .loc, let text = string.text, !Self.isImagePath(text) {
                        skippedPages += 1
                        continue
                    }
                    return string.entry(line: line)
                default:
                    if tag.selfClosing {
                        dropBindings(from: depth)
                    } else {
                        push(role)
                    }
                }
            }
        }
    }

    /// The role of an element with `tag` inside one of role `parent`.
    private static func role(of tag: Tag, in parent: Role) -> Role {
        switch (parent, tag.namespace, tag.local) {
        case (.urlset, .sitemap?, "url"): .url
        case (.sitemapindex, .sitemap?, "sitemap"): .sitemap
        case (.url, .sitemap?, "loc"), (.sitemap, .sitemap?, "loc"): .loc
        case (.url, .image?, "image"): .imageImage
        case (.imageImage, .image?, "loc"): .imageLoc
        default: .other
        }
    }

    /// Whether a URL's path ends in one of ``imageExtensions``.
    static func isImagePath(_ url: String) -> Bool {
        var bytes = Array(url.utf8)[...]
        // After `scheme://` (a sitemap's locations are absolute), up to the query or fragment.
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) {
            bytes = bytes[(colon + 3)...]
        }
        if let end = bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { bytes = bytes[..<end] }
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")) else { return false }  // no path
        let last = bytes[slash...].split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last ?? []
        guard let dot = last.lastIndex(of: UInt8(ascii: ".")) else { return false }
        return imageExtensions.contains(String(decoding: last[(dot + 1)...], as: UTF8.self).lowercased())
    }

    /// Reads the text of a `<loc>` up to its end tag into ``string`` (the element is open).
    private mutating func readText(_ source: inout LinkListByteSource, startLine: Int) throws(LinkListError) {
        while true {
            string.append(contentsOf: source.consumeRun(while: XMLLexer.isPlainText))
            guard let byte = try source.next() else {
                throw source.malformed("unterminated <\(openName(roles.count - 1))>: the file ends before its end tag", line: startLine)
            }
            switch byte {
            case UInt8(ascii: "<"):
                switch try readMarkupOutsideTags(&source) {
                case .endTag:
                    try readEndTag(&source)
                    return
                case .cdata: try XMLLexer.readCDATA(&source, into: &string)
                case .ignorable: continue
                case .startTag: throw source.malformed("an element inside <\(openName(roles.count - 1))>: it holds one URL")
                case .doctype: throw source.malformed("<!DOCTYPE> inside an element")
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

    // MARK: Elements

    private mutating func push(_ role: Role) {
        roles.append(role)
        openNames.append(contentsOf: name)
        nameEnds.append(openNames.count)
    }

    /// The qualified name of the open element at `index`.
    private func openName(_ index: Int) -> String {
        guard index >= 0, index < nameEnds.count else { return "?" }
        let start = index == 0 ? 0 : nameEnds[index - 1]
        return String(decoding: openNames[start..<nameEnds[index]], as: UTF8.self)
    }

    /// Forgets the namespace declarations of elements at `depth` and deeper.
    private mutating func dropBindings(from depth: Int) {
        while let last = bindings.last, last.depth >= depth { bindings.removeLast() }
    }

    /// Reads an end tag after `</` and closes the innermost open element, which it must name.
    private mutating func readEndTag(_ source: inout LinkListByteSource) throws(LinkListError) {
        try readName(&source, first: try source.next())
        try XMLLexer.skipWhitespace(&source)
        guard try source.next() == UInt8(ascii: ">") else {
            throw source.malformed("expected '>' to end </\(String(decoding: name, as: UTF8.self))")
        }
        let index = roles.count - 1
        let start = index == 0 ? 0 : nameEnds[index - 1]
        guard openNames[start..<nameEnds[index]].elementsEqual(name) else {
            throw source.malformed("</\(String(decoding: name, as: UTF8.self))> does not close <\(openName(index))>")
        }
        roles.removeLast()
        nameEnds.removeLast()
        openNames.removeSubrange(start...)
        dropBindings(from: index + 1)
    }

    /// Reads a start tag whose first byte is `first`: its name into ``name``, its attributes
    /// (namespace declarations kept at `depth`), through `>` or `/>`.
    private mutating func readStartTag(_ source: inout LinkListByteSource, first: UInt8, depth: Int) throws(LinkListError) -> Tag {
        try readName(&source, first: first)
        let element = name
        var selfClosing = false
        while true {
            let spaced = try XMLLexer.skipWhitespace(&source)
            guard let byte = try source.next() else { throw source.malformed("the file ends inside a tag") }
            if byte == UInt8(ascii: ">") { break }
            if byte == UInt8(ascii: "/") {
                guard try source.next() == UInt8(ascii: ">") else { throw source.malformed("expected '>' after '/' in a tag") }
                selfClosing = true
                break
            }
            guard spaced else { throw source.malformed("unexpected \(LinkListByteSource.describe(byte)) in a tag") }
            try readName(&source, first: byte)
            try XMLLexer.skipWhitespace(&source)
            guard try source.next() == UInt8(ascii: "=") else { throw source.malformed("expected '=' after an attribute name") }
            try XMLLexer.skipWhitespace(&source)
            guard let quote = try source.next(), quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
                throw source.malformed("expected a quoted attribute value")
            }
            value.removeAll(keepingCapacity: true)
            var valueLength = 0
            while true {
                guard let byte = try source.next() else { throw source.malformed("the file ends inside an attribute value") }
                if byte == quote { break }
                if byte == UInt8(ascii: "<") { throw source.malformed("'<' inside an attribute value") }
                valueLength += 1
                if value.count < Self.longestNamespace { value.append(byte) }
            }
            let xmlns = Array("xmlns".utf8)
            if name.starts(with: xmlns), name.count == xmlns.count || name[xmlns.count] == UInt8(ascii: ":") {
                guard bindings.count < Self.maximumBindings else {
                    throw source.malformed("more than \(Self.maximumBindings) namespace declarations in force")
                }
                let prefix = Array(name.dropFirst(name.count == xmlns.count ? xmlns.count : xmlns.count + 1))
                let uri = valueLength > Self.longestNamespace ? "" : String(decoding: value, as: UTF8.self)
                let namespace: Namespace =
                    uri == Self.sitemapNamespace ? .sitemap : uri == Self.imageNamespace ? .image : .other
                bindings.append((depth, prefix, namespace))
            }
        }
        name = element
        // The element's prefix, resolved with its own declarations too.
        let colon = element.firstIndex(of: UInt8(ascii: ":"))
        let prefix = colon.map { Array(element[..<$0]) } ?? []
        let local = String(decoding: colon.map { element[($0 + 1)...] } ?? element[...], as: UTF8.self)
        let bound = bindings.last(where: { $0.prefix == prefix })?.namespace
        if bound == nil, !prefix.isEmpty {
            throw source.malformed("the prefix '\(String(decoding: prefix, as: UTF8.self))' of <\(String(decoding: element, as: UTF8.self))> is not bound to a namespace (xmlns:…)")
        }
        if selfClosing { dropBindings(from: depth) }
        return Tag(
            namespace: bound, isPlist: prefix.isEmpty && bound == nil && local == "plist", local: Substring(local),
            selfClosing: selfClosing)
    }

    /// Reads a name whose first byte, `first`, is consumed already, into ``name``.
    private mutating func readName(_ source: inout LinkListByteSource, first: UInt8?) throws(LinkListError) {
        guard let first, XMLLexer.isNameStart(first) else {
            throw source.malformed("'<' must start a tag (write a literal '<' as &lt;)")
        }
        name.removeAll(keepingCapacity: true)
        name.append(first)
        while let byte = try source.peek(), XMLLexer.isNameStart(byte) || XMLLexer.isNameDigit(byte) {
            _ = try source.next()
            guard name.count < Self.longestName else {
                throw source.malformed("a name longer than \(Self.longestName) bytes")
            }
            name.append(byte)
        }
    }

    /// Reads the markup after a `<`: a comment or processing instruction (skipped), a DOCTYPE
    /// (skipped; whether it had an internal subset), a CDATA section's opening, or the start of
    /// a tag (an end tag's `/` consumed; a start tag's first byte consumed and returned).
    private mutating func readMarkupOutsideTags(_ source: inout LinkListByteSource) throws(LinkListError) -> Other {
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
                return .doctype(subset: try XMLLexer.skipDoctype(&source, startLine: startLine))
            }
            throw source.malformed("unknown markup after '<!': expected a comment or a CDATA section (DTDs are refused)")
        case UInt8(ascii: "/"):
            return .endTag
        default:
            return .startTag(byte)
        }
    }

    /// Skips a byte order mark; a file that is gzip or a binary plist is refused with a reason.
    private static func checkStart(_ source: inout LinkListByteSource) throws(LinkListError) {
        switch try source.peek() {
        case 0xEF?:
            guard try XMLLexer.consume("\u{FEFF}", from: &source) else {
                throw source.malformed("expected an XML document starting with '<'", line: 1)
            }
        case 0x1F?:
            throw source.malformed("the file is compressed (gzip?): an .xml list must be plain XML", line: 1)
        case UInt8(ascii: "b")?:
            throw source.malformed(
                "expected an XML document starting with '<' (a binary plist must be saved as XML: plutil -convert xml1 FILE)",
                line: 1)
        default:
            break
        }
    }
}

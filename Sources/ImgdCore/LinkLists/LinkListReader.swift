#if canImport(Glibc)
import Glibc
#endif

/// Reads a link list as a stream, in any ``LinkListFormat``: memory stays bounded by one read
/// chunk (64 KiB) plus one URL (``ImageURL/maximumLength``), however long the list is.
///
/// Each call to ``next()`` returns one URL, or one item that is not a URL together with the
/// reason, so the caller can report it with its line number and carry on with the rest:
/// - **Text** (any name but `.json` and `.plist`): UTF-8, one URL a line. Blank lines and lines
///   starting with `#` are skipped. A line that is not an http(s) URL, is not UTF-8, or is longer
///   than ``ImageURL/maximumLength`` is an entry carrying the error. A header comment
///   `# pin: 24h` before the first URL line sets ``pin``.
/// - **JSON** (`.json`): an array of strings, `["https://a.example/1.png", …]`, and objects,
///   `{"url": "…", "key": "…", "sha256": "…", "pin": "24h", "priority": "high"}`; or that array
///   as the `urls` of a wrapper object saying when the list must be ready,
///   `{"ready_by": "2026-12-07T05:30:00Z", "urls": […]}` (``readyBy``). Each string
///   (each object's `url`) is decoded and judged like a text line, an object's other members
///   become the entry's ``LinkListEntry/options``; any other value is an entry saying it is not
///   a URL.
/// - **Plist** (`.plist`): an XML property list, `<plist><array><string>…</string></array></plist>`.
///   Each `<string>` is judged like a text line; any other element is an entry saying it is not
///   a string. Binary plists are refused.
/// - **XML** (`.xml`): read by its root element. A `<plist>` is read as above; a sitemap
///   (`<urlset>`) gives its image locations (`<image:image><image:loc>`, and `<url><loc>` whose
///   path is an image's; the other pages are counted in ``skippedPageLocations``); a sitemap
///   index (`<sitemapindex>`) gives its children's locations as entries marked
///   ``LinkListEntry/isSitemap``, for the caller to fetch and read (``init(xml:path:isInterrupted:)``).
///   Anything else is malformed; DTDs are refused (``SitemapLinkListParser``).
///
/// A JSON or plist list that breaks its syntax throws ``LinkListError/malformed(path:line:reason:)``
/// when the reader reaches the fault, after every entry before it has been returned. Once
/// ``next()`` has thrown, it throws the same error again: a broken list stays broken.
public struct LinkListReader: ~Copyable {
    /// Bytes read from the file at a time.
    static let chunkSize = 64 * 1024

    /// The format the list is read as.
    public let format: LinkListFormat
    /// A text list's `# pin:` header, the duration its images should stay cached. It is read
    /// lazily with the header: nil until ``next()`` has returned its first entry (or nil), and
    /// always nil for JSON and plist lists.
    public private(set) var pin: Duration?
    /// A text list's `# refresh:` header (``RefreshRule``), read as ``pin`` is.
    public private(set) var refresh: RefreshRule?
    /// When the list must be warmed by: a text list's `# ready-by:` header (read as ``pin`` is),
    /// or a JSON list's wrapper object's `ready_by` (known once the member has been read: it may
    /// follow the `urls`, so look after the last entry).
    public private(set) var readyBy: ReadyBy?

    private enum Parser {
        case text(TextLinkListParser)
        case json(JSONLinkListParser)
        case plist(PlistLinkListParser)
        case xml(SitemapLinkListParser)
        /// Stands in while a parser runs, so the parser's storage is not shared and copied.
        case busy
        /// After an error, which every later call throws again.
        case failed(LinkListError)
    }

    /// What an `.xml` list turned out to be once its root was read: a sitemap or a sitemap
    /// index (nil for a plist, and for the other formats).
    public private(set) var sitemapKind: SitemapKind?
    /// The page locations of a sitemap (`<url><loc>`) skipped so far because their path is not
    /// an image's.
    public private(set) var skippedPageLocations = 0

    private var source: LinkListByteSource
    private var parser: Parser
    /// The most bytes a parser has held besides the source's buffer.
    private var peakScratchBytes = 0

    /// Opens the list at `path`, read as `format`, or as its name implies when nil
    /// (``LinkListFormat/init(fileName:)``).
    public init(path: String, format: LinkListFormat? = nil) throws(LinkListError) {
        try self.init(path: path, format: format, chunkSize: Self.chunkSize)
    }

    /// Reads the list open at `fileDescriptor`, which the reader now owns and closes, even when
    /// this initializer throws. This is for callers that open the file themselves (with
    /// `O_NOFOLLOW`, say); `path` names it in errors and, when `format` is nil, chooses the
    /// format by its name.
    ///
    /// - `byteLimit`: read at most this many bytes, as if the file ended there (the spool reads
    ///   a list up to the size it had when claimed; what is appended later is not read).
    /// - `isInterrupted`: asked before each read of the file (every 64 KiB); when it returns
    ///   true, ``next()`` throws ``LinkListError/interrupted(path:)``, however long the line or
    ///   item being read.
    public init(
        fileDescriptor: Int32, path: String, format: LinkListFormat? = nil, byteLimit: Int? = nil,
        isInterrupted: (@Sendable () -> Bool)? = nil
    ) throws(LinkListError) {
        try self.init(
            fileDescriptor: fileDescriptor, path: path, format: format, chunkSize: Self.chunkSize, byteLimit: byteLimit,
            isInterrupted: isInterrupted)
    }

    /// ``init(path:format:)`` with the read size as a test seam.
    init(path: String, format: LinkListFormat?, chunkSize: Int) throws(LinkListError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        try self.init(fileDescriptor: fd, path: path, format: format, chunkSize: chunkSize)
    }

    /// ``init(fileDescriptor:path:format:)`` with the reads as seams: the buffer's `chunkSize`
    /// (64 KiB when nil), and the size of each read(2) in turn (`readSizes`, each at most `chunkSize`), which the
    /// fuzzer varies to cut the list at random places.
    @_spi(Fuzzing)
    public init(
        fileDescriptor: Int32, path: String, format: LinkListFormat?, chunkSize: Int? = nil, byteLimit: Int? = nil,
        isInterrupted: (@Sendable () -> Bool)? = nil, readSizes: [Int]? = nil
    ) throws(LinkListError) {
        let chunkSize = chunkSize ?? Self.chunkSize
        var info = stat()
        if fstat(fileDescriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            close(fileDescriptor)
            throw .cannotOpen(path: path, errno: EISDIR)
        }
        let format = format ?? LinkListFormat(fileName: path)
        self.format = format
        switch format {
        case .text:
            // Text is cut at line ends, so a partial line must survive a fill; it is not
            // validated as a whole, since a bad line is an entry, not an error.
            source = LinkListByteSource(
                fileDescriptor: fileDescriptor, path: path, chunkSize: chunkSize,
                carry: TextLinkListParser.carry, validatesUTF8: false, byteLimit: byteLimit,
                isInterrupted: isInterrupted, readSizes: readSizes)
            parser = .text(TextLinkListParser())
        case .json:
            source = LinkListByteSource(
                fileDescriptor: fileDescriptor, path: path, chunkSize: chunkSize, carry: 0, validatesUTF8: true,
                byteLimit: byteLimit, isInterrupted: isInterrupted, readSizes: readSizes)
            parser = .json(JSONLinkListParser())
        case .plist:
            source = LinkListByteSource(
                fileDescriptor: fileDescriptor, path: path, chunkSize: chunkSize, carry: 0, validatesUTF8: true,
                byteLimit: byteLimit, isInterrupted: isInterrupted, readSizes: readSizes)
            parser = .plist(PlistLinkListParser())
        case .xml:
            source = LinkListByteSource(
                fileDescriptor: fileDescriptor, path: path, chunkSize: chunkSize, carry: 0, validatesUTF8: true,
                byteLimit: byteLimit, isInterrupted: isInterrupted, readSizes: readSizes)
            parser = .xml(SitemapLinkListParser())
        }
    }

    /// Reads an XML list held in memory (a child of a sitemap index, fetched by the daemon):
    /// `bytes` as an `.xml` file's content; `path` (its URL) names it in errors.
    public init(xml bytes: [UInt8], path: String, isInterrupted: (@Sendable () -> Bool)? = nil) {
        format = .xml
        source = LinkListByteSource(
            bytes: bytes, path: path, chunkSize: Self.chunkSize, validatesUTF8: true, isInterrupted: isInterrupted)
        parser = .xml(SitemapLinkListParser())
    }

    /// The next URL or bad item, or nil at the end of the list.
    public mutating func next() throws(LinkListError) -> LinkListEntry? {
        do throws(LinkListError) {
            // Each case takes its parser out of `parser` and puts it back, so the parser's
            // buffers have one owner while it runs and are not copied on write.
            switch parser {
            case .text(var text):
                parser = .busy
                defer {
                    pin = text.pin
                    refresh = text.refresh
                    readyBy = text.readyBy
                    parser = .text(text)
                }
                return try text.next(from: &source)
            case .json(var json):
                parser = .busy
                defer {
                    peakScratchBytes = max(peakScratchBytes, json.scratchCapacity)
                    readyBy = json.readyBy
                    parser = .json(json)
                }
                return try json.next(from: &source)
            case .plist(var plist):
                parser = .busy
                defer {
                    peakScratchBytes = max(peakScratchBytes, plist.scratchCapacity)
                    parser = .plist(plist)
                }
                return try plist.next(from: &source)
            case .xml(var xml):
                parser = .busy
                let entry: LinkListEntry?
                do {
                    entry = try xml.next(from: &source)
                } catch {
                    parser = .xml(xml)
                    throw error
                }
                peakScratchBytes = max(peakScratchBytes, xml.scratchCapacity)
                sitemapKind = xml.kind
                skippedPageLocations = xml.skippedPages
                guard !xml.handsOffToPlist else {
                    // The root is `<plist>`, read already: the rest is a property list's.
                    parser = .plist(PlistLinkListParser.afterPlistTag())
                    return try next()
                }
                parser = .xml(xml)
                return entry
            case .failed(let error):
                throw error
            case .busy:
                preconditionFailure("LinkListReader.next() re-entered")
            }
        } catch {
            parser = .failed(error)
            throw error
        }
    }

    /// The most bytes the reader has held at once in its buffers (the read buffer, the string
    /// being decoded, an item's first bytes for a report), for tests proving memory stays bounded.
    var peakBufferedBytes: Int { source.peakBufferedBytes + peakScratchBytes }
}

#if canImport(Glibc)
import Glibc
#endif

/// One meaningful line of a link list: a URL, or the reason the line is not one.
public struct LinkListEntry: Sendable {
    /// 1-based line number in the file.
    public let line: Int
    /// The line as written, trimmed (cut to 200 characters for an over-long line).
    public let text: String
    /// The parsed URL, or why the line was rejected.
    public let url: Result<ImageURL, ImageURLError>
}

/// Reads a link list (UTF-8 text, one URL a line) as a stream: memory stays bounded by the
/// longest allowed line, however long the list is.
///
/// Blank lines and lines starting with `#` are skipped. A line that is not an http(s) URL, is not
/// UTF-8, or is longer than ``ImageURL/maximumLength`` becomes an entry carrying the error, so the
/// caller can report it with its line number and carry on with the rest.
public struct LinkListReader: ~Copyable {
    /// Bytes read from the file at a time.
    static let chunkSize = 64 * 1024

    private let fileDescriptor: Int32
    private let path: String
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    private var atEndOfFile = false
    private var lineNumber = 0

    /// Opens the list at `path`.
    public init(path: String) throws(LinkListError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw .cannotOpen(path: path, errno: EISDIR)
        }
        self.fileDescriptor = fd
        self.path = path
    }

    deinit { close(fileDescriptor) }

    /// The next URL or bad line, or nil at the end of the file.
    public mutating func next() throws(LinkListError) -> LinkListEntry? {
        while true {
            guard let rawLine = try nextRawLine() else { return nil }
            lineNumber += 1
            if let entry = Self.entry(for: rawLine, line: lineNumber) { return entry }
        }
    }

    /// Parses one line; nil for blank lines and comments.
    static func entry(for rawLine: ArraySlice<UInt8>, line: Int) -> LinkListEntry? {
        var bytes = rawLine
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 || last == 0x0D { bytes.removeLast() }
        if bytes.count >= 3, bytes.prefix(3).elementsEqual([0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        guard let first = bytes.first, first != UInt8(ascii: "#") else { return nil }
        if bytes.count > ImageURL.maximumLength {
            let shown = String(decoding: bytes.prefix(200), as: UTF8.self)
            return LinkListEntry(
                line: line, text: shown,
                url: .failure(.tooLong(length: bytes.count, limit: ImageURL.maximumLength)))
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            let shown = String(decoding: bytes.prefix(200), as: UTF8.self)
            return LinkListEntry(line: line, text: shown, url: .failure(.malformed(shown, reason: "not valid UTF-8")))
        }
        do {
            return LinkListEntry(line: line, text: text, url: .success(try ImageURL(text)))
        } catch {
            return LinkListEntry(line: line, text: text, url: .failure(error))
        }
    }

    /// The next line without its newline; an over-long line is returned cut just past the limit
    /// (its remainder is skipped), so one bad line cannot make the reader hold a whole file.
    private mutating func nextRawLine() throws(LinkListError) -> ArraySlice<UInt8>? {
        let limit = ImageURL.maximumLength + 1
        var overlong: ArraySlice<UInt8>?
        while true {
            let available = buffer[bufferStart...]
            if let newline = available.firstIndex(of: 0x0A) {
                let line = buffer[bufferStart..<newline]
                bufferStart = newline + 1
                return overlong ?? line
            }
            if available.count > limit, overlong == nil {
                overlong = ArraySlice(available.prefix(limit))
            }
            if overlong != nil {
                bufferStart = buffer.count  // keep skipping until the newline
            }
            if atEndOfFile {
                guard bufferStart < buffer.count || overlong != nil else { return nil }
                let line = buffer[bufferStart...]
                bufferStart = buffer.count
                return overlong ?? line
            }
            try fill()
        }
    }

    private mutating func fill() throws(LinkListError) {
        if bufferStart > 0 {
            buffer.removeFirst(bufferStart)
            bufferStart = 0
        }
        let oldCount = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: Self.chunkSize))
        let got = buffer.withUnsafeMutableBytes { raw in
            read(fileDescriptor, raw.baseAddress! + oldCount, Self.chunkSize)
        }
        if got < 0 {
            let code = errno
            buffer.removeLast(Self.chunkSize)
            if code == EINTR { return }
            throw .readFailed(path: path, errno: code)
        }
        buffer.removeLast(Self.chunkSize - got)
        if got == 0 { atEndOfFile = true }
    }
}

/// Why a link list could not be read at all (bad lines are entries, not errors).
public enum LinkListError: Error, Sendable, Equatable, CustomStringConvertible {
    /// open(2) failed.
    case cannotOpen(path: String, errno: Int32)
    /// read(2) failed part-way.
    case readFailed(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let code): "cannot open link list \(path): \(String(cString: strerror(code)))"
        case .readFailed(let path, let code): "cannot read link list \(path): \(String(cString: strerror(code)))"
        }
    }
}

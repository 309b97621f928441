import ImgdBase

#if canImport(Glibc)
import Glibc
#endif

/// The bytes of an open link list, read a chunk at a time into one buffer allocated once, so
/// reading a list of any length holds at most `chunkSize + carry` bytes of it.
///
/// It offers two ways in. The text parser works on whole lines: ``available``, ``consume(upTo:)``
/// and ``fill()``, keeping at most `carry` unconsumed bytes (a partial line) across a fill.
/// The JSON and plist parsers pull single bytes with ``peek()`` and ``next()``, which also
/// count lines, check UTF-8 and can record the first bytes of an item for an error report.
///
/// It reads at most `byteLimit` bytes when given one (what follows is as if the file ended
/// there), and asks `isInterrupted` before each read, so a caller can stop a long read at once.
///
/// It owns the file descriptor and closes it when it goes away.
struct LinkListByteSource: ~Copyable {
    /// The list's path, for error messages.
    let path: String
    /// Bytes asked of read(2) at a time.
    let chunkSize: Int

    /// -1 for a source reading ``memory``.
    private let fileDescriptor: Int32
    /// The bytes of a list held in memory (a sitemap fetched by the daemon), read as a file is.
    private var memory: [UInt8] = []
    private var memoryOffset = 0
    /// `chunkSize + carry` bytes, allocated once; `buffer[start..<end]` is unread.
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private(set) var atEndOfFile = false
    /// Bytes still to read before the end is declared; nil: to the end of the file.
    private var remaining: Int?
    /// Asked before each read: true ends the reading with ``LinkListError/interrupted(path:)``.
    private let isInterrupted: (@Sendable () -> Bool)?
    /// The sizes asked of read(2), in turn (each at most `chunkSize`); nil: always `chunkSize`.
    /// A seam for the fuzzer, which cuts a list at random places to prove that the parsers give
    /// the same entries however the bytes arrive.
    private let readSizes: [Int]?
    private var readCount = 0

    /// The 1-based line of the next byte ``next()`` returns.
    private(set) var line = 1
    /// Set when every byte ``next()`` returns must be UTF-8 (JSON and XML say so).
    private let validatesUTF8: Bool
    private var utf8 = UTF8StreamValidator()

    /// While ``beginCapture()`` is in effect, the first ``LinkListEntry/shownLength`` bytes
    /// ``next()`` returns, so a skipped item can be shown without being held whole.
    private var capture: [UInt8] = []
    private var isCapturing = false

    /// The most bytes this source has held at once (its buffer and capture), for tests
    /// proving that memory stays bounded.
    private(set) var peakBufferedBytes = 0

    /// Takes ownership of `fileDescriptor`. `carry` is the most unconsumed bytes a caller may
    /// leave before calling ``fill()``.
    init(
        fileDescriptor: Int32, path: String, chunkSize: Int, carry: Int, validatesUTF8: Bool, byteLimit: Int? = nil,
        isInterrupted: (@Sendable () -> Bool)? = nil, readSizes: [Int]? = nil
    ) {
        precondition(chunkSize > 0 && carry >= 0 && (byteLimit ?? 0) >= 0)
        precondition(readSizes.map { !$0.isEmpty && $0.allSatisfy { $0 > 0 && $0 <= chunkSize } } ?? true)
        self.fileDescriptor = fileDescriptor
        self.readSizes = readSizes
        self.remaining = byteLimit
        self.isInterrupted = isInterrupted
        self.path = path
        self.chunkSize = chunkSize
        self.validatesUTF8 = validatesUTF8
        self.buffer = [UInt8](repeating: 0, count: chunkSize + carry)
        capture.reserveCapacity(LinkListEntry.shownLength)
        notePeak()
    }

    /// A source over `bytes` held in memory, read as a file with those bytes would be.
    init(bytes: [UInt8], path: String, chunkSize: Int, validatesUTF8: Bool, isInterrupted: (@Sendable () -> Bool)? = nil) {
        self.init(
            fileDescriptor: -1, path: path, chunkSize: chunkSize, carry: 0, validatesUTF8: validatesUTF8,
            isInterrupted: isInterrupted)
        memory = bytes
    }

    deinit { if fileDescriptor >= 0 { close(fileDescriptor) } }

    /// An error at `line` (by default the line of the next byte) of this list.
    func malformed(_ reason: String, line: Int? = nil) -> LinkListError {
        .malformed(path: path, line: line ?? self.line, reason: reason)
    }

    // MARK: Lines (the text format)

    /// The bytes read and not yet consumed. Slices of it must be dropped before ``fill()``,
    /// or the fill copies the buffer.
    var available: ArraySlice<UInt8> { buffer[start..<end] }

    /// Consumes the available bytes before `index` (an index of ``available``).
    mutating func consume(upTo index: Int) {
        precondition(index >= start && index <= end)
        start = index
    }

    /// Reads the next chunk after the unconsumed bytes, which are moved to the front first.
    /// Returns false at the end of the file (or of `byteLimit`). Retries a read interrupted by
    /// a signal; throws ``LinkListError/interrupted(path:)`` when `isInterrupted` says so.
    @discardableResult
    mutating func fill() throws(LinkListError) -> Bool {
        guard !atEndOfFile else { return false }
        if start > 0 {
            let count = end - start
            if count > 0 {
                let from = start
                buffer.withUnsafeMutableBytes { raw in
                    _ = memmove(raw.baseAddress!, raw.baseAddress! + from, count)
                }
            }
            start = 0
            end = count
        }
        precondition(buffer.count - end >= chunkSize, "more than `carry` bytes left unconsumed before a fill")
        if let isInterrupted, isInterrupted() { throw .interrupted(path: path) }
        var step = chunkSize
        if let readSizes {
            step = readSizes[readCount % readSizes.count]
            readCount += 1
        }
        let wanted = min(step, remaining ?? step)
        guard wanted > 0 else {
            atEndOfFile = true
            return false
        }
        while true {
            let offset = end
            if fileDescriptor < 0 {
                let got = min(wanted, memory.count - memoryOffset)
                buffer.replaceSubrange(offset..<(offset + got), with: memory[memoryOffset..<(memoryOffset + got)])
                memoryOffset += got
                notePeak()
                guard got > 0 else {
                    atEndOfFile = true
                    return false
                }
                end += got
                return true
            }
            let got = retryingOnInterrupt {
                buffer.withUnsafeMutableBytes { raw in read(fileDescriptor, raw.baseAddress! + offset, wanted) }
            }
            if got < 0 {
                throw .readFailed(path: path, errno: errno)
            }
            notePeak()
            if got == 0 {
                atEndOfFile = true
                return false
            }
            end += got
            if let left = remaining { remaining = left - got }
            return true
        }
    }

    // MARK: Bytes (the JSON and plist formats)

    /// The next byte without consuming it; nil at the end of the file.
    mutating func peek() throws(LinkListError) -> UInt8? {
        if start == end {
            guard try fill() else { return nil }
        }
        return buffer[start]
    }

    /// Consumes and returns the next byte; nil at the end of the file. Throws when the bytes
    /// stop being UTF-8 (if this source checks), at the line of the offending byte.
    mutating func next() throws(LinkListError) -> UInt8? {
        guard let byte = try peek() else {
            if validatesUTF8, utf8.isInsideCharacter {
                throw malformed("invalid UTF-8: the file ends inside a character")
            }
            return nil
        }
        if validatesUTF8, !utf8.accept(byte) {
            throw malformed("invalid UTF-8 (byte 0x\(String(byte, radix: 16, uppercase: true))): a link list must be UTF-8")
        }
        start += 1
        if byte == 0x0A { line += 1 }
        if isCapturing, capture.count < LinkListEntry.shownLength { capture.append(byte) }
        return byte
    }

    /// Consumes the buffered bytes up to the first one `isRunByte` rejects, and returns them:
    /// the fast path through plain text, where calling ``next()`` for every byte would be slow.
    /// It never reads (so it may return nothing while the file has more) and takes only ASCII
    /// bytes, which need no UTF-8 check beyond not being inside a character.
    mutating func consumeRun(while isRunByte: (UInt8) -> Bool) -> ArraySlice<UInt8> {
        guard !(validatesUTF8 && utf8.isInsideCharacter) else { return [] }
        let from = start
        let to = end
        var newlines = 0
        let stop = buffer.withUnsafeBufferPointer { bytes in
            var index = from
            while index < to {
                let byte = bytes[index]
                guard byte < 0x80, isRunByte(byte) else { break }
                if byte == 0x0A { newlines += 1 }
                index += 1
            }
            return index
        }
        let run = buffer[from..<stop]
        start = stop
        line += newlines
        if isCapturing, capture.count < LinkListEntry.shownLength {
            capture.append(contentsOf: run.prefix(LinkListEntry.shownLength - capture.count))
        }
        return run
    }

    /// Starts recording the bytes ``next()`` returns (the first ``LinkListEntry/shownLength``).
    mutating func beginCapture() {
        capture.removeAll(keepingCapacity: true)
        isCapturing = true
    }

    /// Stops recording and returns what was recorded.
    mutating func endCapture() -> [UInt8] {
        isCapturing = false
        notePeak()
        return capture
    }

    private mutating func notePeak() {
        peakBufferedBytes = max(peakBufferedBytes, buffer.capacity + capture.capacity)
    }

    // MARK: Helpers for parsers

    /// A byte for an error message: `'x'` for printable ASCII, otherwise what it is.
    static func describe(_ byte: UInt8?) -> String {
        guard let byte else { return "the end of the file" }
        switch byte {
        case 0x21...0x7E: return "'\(Character(Unicode.Scalar(byte)))'"
        case 0x80...: return "a non-ASCII character"
        default: return "control character U+\(hex4(byte))"
        }
    }

    /// `byte` as four hex digits, as in U+000A.
    static func hex4(_ value: some BinaryInteger) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// The value of a hex digit, or nil.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

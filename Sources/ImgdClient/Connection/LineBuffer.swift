/// Bytes read from the socket, cut into lines. A line longer than `limit` is an error rather
/// than a buffer that grows without bound. A descriptor received with a read belongs to the
/// read's last byte; it is handed out with the line that byte ends (``lineDescriptor``), and
/// one on any other byte is closed (the protocol sends one only with a reply's `\n`).
struct LineBuffer {
    /// The longest line accepted, excluding its newline.
    let limit: Int
    private var bytes: [UInt8] = []
    /// Where the unread part of `bytes` starts (consumed bytes are dropped in batches).
    private var start = 0
    /// How far past `start` the search for a newline has already looked, so a long line
    /// arriving in small pieces is scanned once, not once per piece.
    private var scanned = 0
    /// Bytes dropped from the front of `bytes` so far: `dropped + index` is a byte's offset in
    /// the stream.
    private var dropped = 0
    /// Descriptors received, each with the stream offset of the byte it came with, in order.
    private var marks: [(offset: Int, descriptor: ImgdDescriptor)] = []
    /// The descriptor that came with the line ``nextLine()`` returned last, if any, until
    /// ``takeLineDescriptor()`` hands it over (the buffer must not keep it open).
    private var lineDescriptor: ImgdDescriptor?

    init(limit: Int) {
        self.limit = limit
    }

    /// Appends bytes read from the socket.
    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        if start > 0, start >= bytes.count / 2 {
            bytes.removeFirst(start)
            dropped += start
            start = 0
        }
        bytes.append(contentsOf: chunk)
    }

    /// Appends bytes read with `descriptor`, which belongs to their last byte.
    mutating func append(_ chunk: UnsafeRawBufferPointer, descriptor: ImgdDescriptor) {
        append(chunk)
        guard !chunk.isEmpty else { return }
        marks.append((dropped + bytes.count - 1, descriptor))
    }

    /// The next complete line without its newline, skipping blank lines; nil when no complete
    /// line is buffered.
    mutating func nextLine() -> [UInt8]? {
        while true {
            var index = start + scanned
            while index < bytes.count, bytes[index] != UInt8(ascii: "\n") {
                index += 1
            }
            guard index < bytes.count else {
                scanned = bytes.count - start
                return nil
            }
            let line = Array(bytes[start..<index])
            start = index + 1
            scanned = 0
            lineDescriptor = nil
            if !marks.isEmpty { takeDescriptor(endingAt: dropped + index) }
            if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) {
                continue  // blank lines are ignored, as the protocol says
            }
            return line
        }
    }

    /// The descriptor that came with the line ``nextLine()`` returned last; the buffer lets go of it.
    mutating func takeLineDescriptor() -> ImgdDescriptor? {
        defer { lineDescriptor = nil }
        return lineDescriptor
    }

    /// Makes the descriptor that came with the newline at stream offset `end` the line's; those
    /// on earlier bytes are closed (released).
    private mutating func takeDescriptor(endingAt end: Int) {
        while let first = marks.first, first.offset <= end {
            marks.removeFirst()
            if first.offset == end { lineDescriptor = first.descriptor }
        }
    }

    /// True when the partial line buffered is already longer than `limit`.
    /// The bytes after the last line returned, handed over and dropped from the buffer: a
    /// stream command's raw bytes read with its reply line (Protocol.md, "Stream mode").
    mutating func takeRemaining() -> [UInt8] {
        defer {
            dropped += bytes.count
            bytes.removeAll()
            start = 0
            scanned = 0
        }
        return Array(bytes[start...])
    }

    /// Bytes are buffered past the last line returned.
    var hasUnread: Bool { bytes.count > start }

    var isOverLimit: Bool {
        bytes.count - start > limit
    }

    /// Whether any bytes of an unfinished line are buffered.
    var hasPartialLine: Bool {
        bytes.count > start
    }
}

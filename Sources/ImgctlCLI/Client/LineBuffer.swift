/// Bytes read from the socket, cut into lines. A line longer than `limit` is an error rather
/// than a buffer that grows without bound.
struct LineBuffer {
    /// The longest line accepted, excluding its newline.
    let limit: Int
    private var bytes: [UInt8] = []
    /// Where the unread part of `bytes` starts (consumed bytes are dropped in batches).
    private var start = 0
    /// How far past `start` the search for a newline has already looked, so a long line
    /// arriving in small pieces is scanned once, not once per piece.
    private var scanned = 0

    init(limit: Int) {
        self.limit = limit
    }

    /// Appends bytes read from the socket.
    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        if start > 0, start >= bytes.count / 2 {
            bytes.removeFirst(start)
            start = 0
        }
        bytes.append(contentsOf: chunk)
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
            if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) {
                continue  // blank lines are ignored, as the protocol says
            }
            return line
        }
    }

    /// True when the partial line buffered is already longer than `limit`.
    var isOverLimit: Bool {
        bytes.count - start > limit
    }

    /// Whether any bytes of an unfinished line are buffered.
    var hasPartialLine: Bool {
        bytes.count > start
    }
}

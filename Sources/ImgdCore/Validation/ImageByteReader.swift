/// Reads an `ImageByteSource` through one cached window.
///
/// Header walks touch many nearby offsets (a PNG's IHDR, a TIFF's IFD entries, JPEG segment
/// headers); serving them from one 4 KiB read keeps a file-backed validation to a handful of
/// `pread`s, and moving the window only when a read falls outside it keeps "read the head and
/// the tail" from ever reading the middle.
struct ImageByteReader {
    /// Big enough for every fixed header imgd reads and for the first IFD of most TIFFs.
    static let windowSize = 4096

    private let source: any ImageByteSource
    /// The body's total size.
    let count: Int
    private var window: [UInt8] = []
    private var windowStart = 0

    init(_ source: any ImageByteSource) {
        self.source = source
        count = max(0, source.count)
    }

    /// Up to `length` bytes at `offset`; fewer only at the end of the body.
    mutating func bytes(at offset: Int, count length: Int) throws -> [UInt8] {
        guard offset >= 0, length > 0, offset < count else { return [] }
        let length = min(length, count - offset)
        if length > Self.windowSize {
            // A long read would only evict the window for nothing: read it directly.
            return try source.bytes(at: offset, count: length)
        }
        return Array(window[try load(offset, length)])
    }

    /// Calls `body` with up to `length` bytes at `offset` (fewer only at the end of the body):
    /// from the window when it holds them, else lent by the source, so a front-to-back pass
    /// over a small body costs no read beyond the window, and over a large one no copy of a
    /// body in memory.
    mutating func withBytes<Result>(
        at offset: Int, count length: Int, _ body: (UnsafeRawBufferPointer) throws -> Result
    ) throws -> Result {
        guard offset >= 0, length > 0, offset < count else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        let length = min(length, count - offset)
        if offset >= windowStart, offset + length <= windowStart + window.count {
            let lower = offset - windowStart
            return try window.withUnsafeBytes {
                try body(UnsafeRawBufferPointer(rebasing: $0[lower..<lower + length]))
            }
        }
        return try source.withBytes(at: offset, count: length, body)
    }

    /// Exactly `length` bytes at `offset`, or nil when the body ends first.
    mutating func exactly(at offset: Int, count length: Int) throws -> [UInt8]? {
        let bytes = try bytes(at: offset, count: length)
        return bytes.count == length ? bytes : nil
    }

    /// The byte at `offset`, or nil past the end.
    mutating func byte(at offset: Int) throws -> UInt8? {
        guard offset >= 0, offset < count else { return nil }
        let range = try load(offset, 1)
        return range.isEmpty ? nil : window[range.lowerBound]
    }

    /// The unsigned integer of `size` bytes (1 to 4) at `offset`, or nil when the body ends first.
    mutating func uint(at offset: Int, size: Int, _ order: ImageByteOrder) throws -> Int? {
        precondition((1...4).contains(size), "wider integers may not fit an Int; use uint64")
        guard let bytes = try exactly(at: offset, count: size) else { return nil }
        return Int(order.decode(bytes))
    }

    /// The unsigned 64-bit integer at `offset`, or nil when the body ends first.
    mutating func uint64(at offset: Int, _ order: ImageByteOrder) throws -> UInt64? {
        guard let bytes = try exactly(at: offset, count: 8) else { return nil }
        return order.decode(bytes)
    }

    /// The window indices holding `offset..<offset + length` (fewer at the end), moving the window if needed.
    private mutating func load(_ offset: Int, _ length: Int) throws -> Range<Int> {
        if offset < windowStart || offset + length > windowStart + window.count {
            window = try source.bytes(at: offset, count: min(Self.windowSize, count - offset))
            windowStart = offset
        }
        let lower = offset - windowStart
        return lower..<min(lower + length, window.count)
    }
}

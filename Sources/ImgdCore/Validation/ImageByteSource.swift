/// Random access to the bytes being validated: a file read with `pread`, or memory.
///
/// Validation asks for small ranges (a header, a segment, the last bytes) so that checking a
/// large image reads little of it; only the checks that must see every byte (PNG's CRC-32s)
/// read a body whole, once, front to back, in bounded pieces.
public protocol ImageByteSource {
    /// The total number of bytes in the body.
    var count: Int { get }
    /// Up to `count` bytes starting at `offset`. Returns fewer bytes only at the end of the body
    /// (none when `offset >= self.count`).
    func bytes(at offset: Int, count: Int) throws -> [UInt8]

    /// Calls `body` with up to `count` bytes starting at `offset` (fewer only at the end of the
    /// body), lending them without a copy when the source can. Checks that must see every byte
    /// (PNG's CRCs) read through this, so a body in memory is not copied piece by piece.
    func withBytes<Result>(
        at offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) throws -> Result
    ) throws -> Result
}

extension ImageByteSource {
    /// Copies the bytes with `bytes(at:count:)` and lends the copy.
    public func withBytes<Result>(
        at offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) throws -> Result
    ) throws -> Result {
        try bytes(at: offset, count: count).withUnsafeBytes(body)
    }
}

/// Random access to the bytes being validated: a file read with `pread`, or memory.
///
/// Validation asks for small ranges (a header, a segment, the last bytes) so that checking a
/// large image never reads all of it.
public protocol ImageByteSource {
    /// The total number of bytes in the body.
    var count: Int { get }
    /// Up to `count` bytes starting at `offset`. Returns fewer bytes only at the end of the body
    /// (none when `offset >= self.count`).
    func bytes(at offset: Int, count: Int) throws -> [UInt8]
}

/// An `ImageByteSource` over bytes already in memory.
public struct MemoryByteSource: ImageByteSource, Sendable {
    private let storage: [UInt8]

    public init(_ bytes: [UInt8]) {
        storage = bytes
    }

    public var count: Int { storage.count }

    public func bytes(at offset: Int, count: Int) throws -> [UInt8] {
        guard offset >= 0, count > 0, offset < storage.count else { return [] }
        return Array(storage[offset..<min(storage.count, offset + count)])
    }

    /// Lends the stored bytes themselves: no copy.
    public func withBytes<Result>(
        at offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) throws -> Result
    ) throws -> Result {
        guard offset >= 0, count > 0, offset < storage.count else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try storage.withUnsafeBytes { all in
            try body(UnsafeRawBufferPointer(rebasing: all[offset..<min(all.count, offset + count)]))
        }
    }
}

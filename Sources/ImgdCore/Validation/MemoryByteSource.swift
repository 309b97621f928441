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
}

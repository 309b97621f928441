import Foundation
import ImgdCore
import ImgdTestSupport

@testable import ImgdStore

/// A disk tier in a folder of its own, filled with small entries.
struct CacheFixture {
    let root: String
    let disk: DiskCache

    init(root: String? = nil, limit: Int = 1_000_000) throws {
        self.root = try root ?? ScratchFolder("imgd-cache").path("cache")
        disk = try DiskCache(root: self.root, limit: limit)
    }

    /// Publishes and records `count` entries of `size` bytes, last used at `lastAccess(index)`.
    @discardableResult
    func fill(
        _ count: Int, size: Int = 100, from first: Int = 0, lastAccess: (Int) -> Int = { 1000 * ($0 + 1) }
    ) throws -> [IndexEntry] {
        var entries: [IndexEntry] = []
        for index in first..<(first + count) {
            let url = try ImageURL("http://example.com/f\(index).png")
            let content = [UInt8](repeating: UInt8(index & 0xFF), count: size)
            let file = try disk.directory.makeTempFile(for: url.cacheKey)
            try content.withUnsafeBytes { try file.write($0) }
            try disk.directory.publish(file, as: url.cacheKey)
            entries.append(IndexEntry(
                key: url.cacheKey, url: url.normalized, bytes: size, sha256: SHA256Digest(of: content), format: .png,
                width: 1, height: 1, etag: nil, lastModified: nil, contentType: nil,
                fetchedAt: lastAccess(index), lastAccess: lastAccess(index)))
        }
        try disk.record(entries)
        return entries
    }

    func remove() {
        try? disk.close()
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// A value tests change while the code under test reads it from another thread.
final class Shared<Value: Sendable>: Sendable {
    private let value: Locked<Value>

    init(_ value: Value) { self.value = Locked(value) }

    var current: Value {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

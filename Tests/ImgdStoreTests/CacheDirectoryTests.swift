import Foundation
import ImgdCore
import Testing

@testable import ImgdStore

@Suite("Cache folder")
struct CacheDirectoryTests {
    private func scratch() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("imgd-store-\(UUID().uuidString)/cache").path
    }

    @Test("opening creates the folders and clears leftovers from tmp/")
    func clearsTemp() throws {
        let root = scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try CacheDirectory(root: root)
        #expect(FileManager.default.createFile(atPath: root + "/tmp/leftover.part", contents: Data([1, 2, 3])))
        let reopened = try CacheDirectory(root: root)
        #expect(try FileManager.default.contentsOfDirectory(atPath: reopened.tempFolder).isEmpty)
    }

    @Test("a temp file appears under its final name only when published, creating fan-out folders")
    func publish() throws {
        let root = scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let key = try ImageURL("http://example.com/a.png").cacheKey
        let file = try cache.makeTempFile(for: key)
        try [UInt8]("hello".utf8).withUnsafeBytes { try file.write($0) }
        #expect(cache.existingSize(of: key) == nil)
        let path = try cache.publish(file, as: key)
        #expect(path == root + "/" + key.relativePath)
        #expect(cache.existingSize(of: key) == 5)
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).isEmpty)
    }

    @Test("a discarded or forgotten temp file is removed")
    func discard() throws {
        let root = scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let key = try ImageURL("http://example.com/b.png").cacheKey
        try cache.makeTempFile(for: key).discard()
        do { _ = try cache.makeTempFile(for: key) }  // dropped without discard: deinit cleans up
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).isEmpty)
        #expect(cache.existingSize(of: key) == nil)
    }

    @Test("a cache root that cannot be created is a clear error")
    func unusableRoot() {
        #expect {
            _ = try CacheDirectory(root: "/proc/imgd-cannot-be-here")
        } throws: { error in
            "\(error)".hasPrefix("cannot open cache folder /proc/imgd-cannot-be-here")
        }
    }
}

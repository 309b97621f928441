import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

@Suite("Cache folder", .offThePool)
struct CacheDirectoryTests {
    private func scratch() throws -> String {
        // A cache folder not made yet, in a scratch folder.
        try ScratchFolder("imgd-store").path("cache")
    }

    @Test("opening creates the folders and clears leftovers from tmp/")
    func clearsTemp() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try CacheDirectory(root: root)
        #expect(FileManager.default.createFile(atPath: root + "/tmp/leftover.part", contents: Data([1, 2, 3])))
        let reopened = try CacheDirectory(root: root)
        #expect(try FileManager.default.contentsOfDirectory(atPath: reopened.tempFolder).isEmpty)
    }

    @Test("a temp file appears under its final name only when published, in its fan-out folder (made again if removed)")
    func publish() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        // The 256 fan-out folders exist from the start, and nothing else.
        let folders = try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.utf8.count == 2 }
        #expect(Set(folders) == Set((0..<256).map { CacheDirectory.hexByte($0) }))
        let key = try ImageURL("http://example.com/a.png").cacheKey
        let file = try cache.makeTempFile(for: key)
        try [UInt8]("hello".utf8).withUnsafeBytes { try file.write($0) }
        #expect(cache.existingSize(of: key) == nil)
        let path = try cache.publish(file, as: key)
        #expect(path == root + "/" + String(key.hex.prefix(2)) + "/" + key.hex)
        #expect(path == root + "/" + key.relativePath)
        #expect(cache.existingSize(of: key) == 5)
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).isEmpty)

        // An operator removed the fan-out folder: the next publish into it makes it again.
        try FileManager.default.removeItem(atPath: root + "/" + String(key.hex.prefix(2)))
        let again = try cache.makeTempFile(for: key)
        try [UInt8]("again".utf8).withUnsafeBytes { try again.write($0) }
        #expect(try cache.publish(again, as: key) == path)
        #expect(cache.existingSize(of: key) == 5)
    }

    @Test("a validated body is written straight to its final name; a name already taken is left whole for the atomic replace")
    func publishNew() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache = try CacheDirectory(root: root)
        let key = try ImageURL("http://example.com/new.png").cacheKey
        let body = [UInt8](repeating: 7, count: 5000)
        let path = try cache.publishNew(body, as: key)
        #expect(path == cache.path(for: key))
        #expect(FileManager.default.contents(atPath: cache.path(for: key)) == Data(body))
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.tempFolder).isEmpty)

        // Taken: nothing is written, the old file stays as it was (the caller renames over it).
        let other = [UInt8](repeating: 9, count: 10)
        #expect(try cache.publishNew(other, as: key) == nil)
        #expect(FileManager.default.contents(atPath: cache.path(for: key)) == Data(body))

        // An operator removed the fan-out folder: it is made again.
        let second = try ImageURL("http://example.com/second.png").cacheKey
        try FileManager.default.removeItem(atPath: root + "/" + String(second.hex.prefix(2)))
        #expect(try cache.publishNew(other, as: second) == cache.path(for: second))
        #expect(cache.existingSize(of: second) == 10)
    }

    @Test("a body that runs out of space on its way to its final name leaves nothing under that name", .enabled(if: TmpfsMount.isAvailable, "needs root to mount a tmpfs"))
    func publishNewOutOfSpace() throws {
        let mount = try TmpfsMount(bytes: 256 * 1024)
        defer { mount.unmount() }
        let cache = try CacheDirectory(root: mount.path + "/cache")
        let kept = try ImageURL("http://example.com/kept.png").cacheKey
        let small = [UInt8](repeating: 1, count: 4096)
        _ = try cache.publishNew(small, as: kept)

        let key = try ImageURL("http://example.com/big.png").cacheKey
        let big = [UInt8](repeating: 2, count: 1024 * 1024)
        #expect {
            try cache.publishNew(big, as: key)
        } throws: { error in
            guard let error = error as? StoreError, case .writeFailed(let path, _) = error else { return false }
            return error.isOutOfSpace && path == cache.path(for: key)
        }
        #expect(cache.existingSize(of: key) == nil)
        #expect(FileManager.default.contents(atPath: cache.path(for: kept)) == Data(small))
    }

    @Test("a cache in the two-level layout of earlier versions is moved to one level when opened, once")
    func movesTwoLevelLayout() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // As an earlier imgd left it: each file at ab/cd/<key>.
        let keys = try (0..<20).map { try ImageURL("http://example.com/\($0).png").cacheKey }
        for key in keys {
            let hex = key.hex
            let folder = root + "/" + hex.prefix(2) + "/" + hex.dropFirst(2).prefix(2)
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: folder + "/" + hex, contents: Data(hex.utf8)))
        }
        let cache = try CacheDirectory(root: root)
        #expect(cache.movedFromTwoLevelLayout == keys.count)
        for key in keys {
            #expect(cache.existingSize(of: key) == 64)
            #expect(FileManager.default.contents(atPath: cache.path(for: key)) == Data(key.hex.utf8))
            // The second-level folder is gone.
            #expect(!FileManager.default.fileExists(atPath: root + "/" + key.hex.prefix(2) + "/" + key.hex.dropFirst(2).prefix(2)))
        }
        #expect(FileManager.default.fileExists(atPath: root + "/" + CacheDirectory.layoutMarker))

        // Opened again: nothing to move, nothing lost.
        let reopened = try CacheDirectory(root: root)
        #expect(reopened.movedFromTwoLevelLayout == 0)
        for key in keys { #expect(reopened.existingSize(of: key) == 64) }
    }

    @Test("a discarded or forgotten temp file is removed")
    func discard() throws {
        let root = try scratch()
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

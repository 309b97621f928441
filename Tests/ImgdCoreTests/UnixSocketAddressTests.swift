import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Unix socket addresses", .offThePool)
struct UnixSocketAddressTests {
    /// A fresh folder for socket files, short enough that its paths fit an address.
    static func makeFolder() throws -> String {
        try ScratchFolder("imgd-sock").path
    }

    /// A stream socket, closed on exec.
    static func streamSocket() throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(descriptor >= 0)
        return descriptor
    }

    @Test("a path of 107 bytes is taken; one of 108 is refused with a typed error naming the limit")
    func tooLong() throws {
        #expect(UnixSocketAddress.maximumLength == 107)
        let longest = "/" + String(repeating: "a", count: 106)
        #expect(try UnixSocketAddress(path: longest).description == longest)
        let over = longest + "b"
        #expect(throws: UnixSocketAddressError.tooLong(over, limit: 107)) { try UnixSocketAddress(path: over) }
        #expect(throws: UnixSocketAddressError.tooLong("@" + String(repeating: "n", count: 108), limit: 107)) {
            try UnixSocketAddress(abstractName: String(repeating: "n", count: 108))
        }
    }

    @Test("bind, listen and connect through a path: the file appears and the listener accepts")
    func pathRoundTrip() throws {
        let folder = try Self.makeFolder()
        defer { rmdir(folder) }
        let path = folder + "/s.sock"
        defer { unlink(path) }
        let address = try UnixSocketAddress(path: path)
        #expect(!address.isAbstract)
        let listener = try Self.streamSocket()
        defer { close(listener) }
        #expect(address.bind(listener) == 0)
        #expect(listen(listener, 1) == 0)
        var status = stat()
        #expect(lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK)

        let client = try Self.streamSocket()
        defer { close(client) }
        #expect(address.connect(client) == 0)
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        close(accepted)

        // The address the kernel reports for the listener is the path given.
        var bound = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        #expect(named == 0)
        let reported = withUnsafeBytes(of: bound.sun_path) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #expect(reported == path)
    }

    @Test("an abstract name binds without a file, reads as @name, and takes connections")
    func abstractName() throws {
        let name = "imgd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let address = try UnixSocketAddress(abstractName: name)
        #expect(address.isAbstract)
        #expect(address.description == "@" + name)
        #expect(access(name, F_OK) != 0)

        let listener = try Self.streamSocket()
        defer { close(listener) }
        #expect(address.bind(listener) == 0)
        #expect(listen(listener, 1) == 0)
        // The name is taken whole, with no trailing zeros: a second bind to it is refused.
        let second = try Self.streamSocket()
        defer { close(second) }
        #expect(address.bind(second) == EADDRINUSE)

        let client = try Self.streamSocket()
        defer { close(client) }
        #expect(address.connect(client) == 0)
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        close(accepted)

        // A path of the same text is another address: nothing listens there.
        let elsewhere = try Self.streamSocket()
        defer { close(elsewhere) }
        #expect(try UnixSocketAddress(path: "/nonexistent/" + name).connect(elsewhere) == ENOENT)
    }

    @Test("connecting where nothing listens gives the errno, not a crash or a retry loop")
    func refused() throws {
        let folder = try Self.makeFolder()
        defer { rmdir(folder) }
        let client = try Self.streamSocket()
        defer { close(client) }
        #expect(try UnixSocketAddress(path: folder + "/none.sock").connect(client) == ENOENT)
    }
}

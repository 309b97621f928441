import Foundation
import ImgdCore
import ImgdTestSupport

/// Blocking Unix stream socket calls for tests, each with a deadline instead of a sleep.
enum TestSocket {
    /// A socket bound at `path`; listening unless `listening` is false (then connecting to it is
    /// refused).
    static func bound(at path: String, listening: Bool = true) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(descriptor >= 0)
        let bound = (try? UnixSocketAddress(path: path))?.withSockaddr { bind(descriptor, $0, $1) }
        precondition(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
        if listening { precondition(listen(descriptor, 4) == 0) }
        return descriptor
    }

    /// Waits up to `timeout` for `descriptor` to be readable.
    static func waitReadable(_ descriptor: Int32, timeout: Duration = .seconds(2)) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        return poll(&entry, 1, milliseconds) == 1
    }

    /// Accepts one connection, waiting up to 2 seconds.
    static func accept(_ listener: Int32) -> Int32? {
        guard waitReadable(listener) else { return nil }
        let connection = Glibc.accept(listener, nil, nil)
        return connection >= 0 ? connection : nil
    }

    /// Reads until `count` bytes have come or 2 seconds have passed.
    static func read(_ descriptor: Int32, count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(2)
        while bytes.count < count, ContinuousClock.now < deadline, waitReadable(descriptor) {
            var buffer = [UInt8](repeating: 0, count: count - bytes.count)
            let result = Glibc.read(descriptor, &buffer, buffer.count)
            if result <= 0 { break }
            bytes += buffer[..<result]
        }
        return bytes
    }

    /// Writes `bytes` to `descriptor` in one call.
    static func send(_ bytes: [UInt8], to descriptor: Int32) {
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        precondition(written == bytes.count, "write: \(String(cString: strerror(errno)))")
    }
}

import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `writeAll`, the one write loop: every byte through partial writes, and its one stop
/// condition (any failure but EINTR, EAGAIN included), with the errno and the count written.
@Suite("Writing every byte (writeAll)", .offThePool)
struct WriteAllTests {
    /// The bytes waiting in `descriptor` (a non-blocking pipe's read end), all of them.
    static func readAvailable(_ descriptor: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard got > 0 else { break }
            bytes += chunk[..<got]
        }
        return bytes
    }

    static func pipeEnds(nonBlocking: Bool) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        if nonBlocking {
            for end in ends { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
        }
        return (ends[0], ends[1])
    }

    @Test("every byte of a buffer reaches a pipe, in order; an empty buffer writes nothing")
    func writesEveryByte() throws {
        let ends = Self.pipeEnds(nonBlocking: true)
        defer { close(ends.read); close(ends.write) }
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try writeAll(ends.write, bytes)
        try writeAll(ends.write, [])
        #expect(Self.readAvailable(ends.read) == bytes)
    }

    @Test("a full non-blocking pipe: partial writes go on, then EAGAIN stops it with the count written; the rest follows once there is room")
    func partialWritesThenAgain() throws {
        let ends = Self.pipeEnds(nonBlocking: true)
        defer { close(ends.read); close(ends.write) }
        // Fill the pipe, then make room for one page: a write of more than that goes out in part.
        let filler = [UInt8](repeating: 0xAA, count: 4_096)
        var filled = 0
        while true {
            let wrote = filler.withUnsafeBytes { write(ends.write, $0.baseAddress, $0.count) }
            guard wrote > 0 else { break }
            filled += wrote
        }
        #expect(errno == EAGAIN)
        var page = [UInt8](repeating: 0, count: 4_096)
        #expect(page.withUnsafeMutableBytes { read(ends.read, $0.baseAddress, $0.count) } == 4_096)

        let bytes = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        var sent = 0
        do throws(WriteError) {
            try writeAll(ends.write, bytes)
            Issue.record("a full pipe took 20,000 bytes")
        } catch {
            #expect(error.errno == EAGAIN)
            #expect(error.written > 0 && error.written < bytes.count, "partly written: \(error.written)")
            sent = error.written
        }
        // The caller that is non-blocking by design resumes after what went.
        var received = Array(Self.readAvailable(ends.read).dropFirst(filled - 4_096))
        try bytes[sent...].withUnsafeBytes { try writeAll(ends.write, $0) }
        received += Self.readAvailable(ends.read)
        #expect(received == bytes)
    }

    @Test("no such descriptor: EBADF, nothing written, and the system's words in the description")
    func badDescriptor() {
        // -1, not a descriptor just closed: another test running meanwhile may have its number.
        do throws(WriteError) {
            try writeAll(-1, [1, 2, 3])
            Issue.record("a closed descriptor took the bytes")
        } catch {
            #expect(error == WriteError(errno: EBADF, written: 0))
            #expect(error.description.contains("Bad file descriptor"), "\(error)")
        }
    }

    @Test("with MSG_NOSIGNAL, a socket whose peer went away is EPIPE, not a SIGPIPE that would end the process")
    func sendFlagsNoSignal() {
        var ends: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        close(ends[1])
        defer { close(ends[0]) }
        do throws(WriteError) {
            try writeAll(ends[0], [1, 2, 3], sendFlags: Int32(MSG_NOSIGNAL))
            Issue.record("a socket without a peer took the bytes")
        } catch {
            #expect(error.errno == EPIPE && error.written == 0)
        }
    }
}

import ImgdCore
#if canImport(Glibc)
import Glibc
#endif

/// Wakes the monitor's thread out of `poll` when its task is cancelled: a connected socket pair
/// whose read end is in the poll set. (Swift's Glibc module declares neither `eventfd` nor
/// `pipe2`; `socketpair` takes close-on-exec atomically.)
final class WakeSignal: Sendable {
    /// Guards the two descriptors: ``signal()`` runs in the cancellation handler on any thread
    /// and ``close()`` on the monitor's thread; without the lock a late signal could write to a
    /// descriptor number already reused by someone else.
    private let ends: Locked<(read: Int32, write: Int32)?>
    /// The end to poll for `POLLIN`. Valid until ``close()``.
    let readEnd: Int32
    /// Both descriptors, for tests that check they are closed.
    let descriptors: [Int32]

    init() throws(MemoryPressureError) {
        var pair: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        guard socketpair(AF_UNIX, type, 0, &pair) == 0 else { throw .cannotStartThread(errno: errno) }
        ends = Locked((pair[0], pair[1]))
        readEnd = pair[0]
        descriptors = pair
    }

    /// Makes the read end readable, for good: the byte is never read, so every later `poll`
    /// returns at once too. Does nothing after ``close()``.
    func signal() {
        ends.withLock { ends in
            guard let ends else { return }
            var byte: UInt8 = 1
            _ = write(ends.write, &byte, 1)
        }
    }

    /// Closes both ends. Safe to call more than once.
    func close() {
        ends.withLock { ends in
            guard let open = ends else { return }
            Glibc.close(open.read)
            Glibc.close(open.write)
            ends = nil
        }
    }
}

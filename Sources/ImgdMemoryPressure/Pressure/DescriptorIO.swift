#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// The few blocking descriptor reads the pressure monitor needs, retrying interrupts and
/// reporting failures as ``MemoryPressureError`` (its writes are ImgdBase's `writeAll`).
enum DescriptorIO {
    /// The whole of a small file (a PSI file, /proc/self/cgroup), at most `limit` bytes; the
    /// rest is ignored. Opened and closed on each call, so a file replaced by rename is seen.
    static func readFile(_ path: String, limit: Int) throws(MemoryPressureError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotOpen(path: path, errno: errno) }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let result = retryingOnInterrupt { bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + count, limit - count) } }
            if result < 0 {
                throw .readFailed(path: path, errno: errno)
            }
            if result == 0 { break }
            count += result
        }
        bytes.removeSubrange(count...)
        return bytes
    }

    /// Reads and discards what is waiting on a non-blocking `descriptor`, at most 64 KiB a call
    /// so a peer that never stops writing cannot keep the thread here.
    /// Returns how many bytes were read and whether the other end has closed.
    static func drain(_ descriptor: Int32, path: String) throws(MemoryPressureError) -> (count: Int, closed: Bool) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var total = 0
        for _ in 0..<16 {
            let result = retryingOnInterrupt { buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) } }
            if result > 0 {
                total += result
                continue
            }
            if result == 0 { return (total, true) }
            switch errno {
            case EAGAIN, EWOULDBLOCK: return (total, false)
            default: throw .readFailed(path: path, errno: errno)
            }
        }
        return (total, false)
    }
}

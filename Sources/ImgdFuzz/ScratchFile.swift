#if canImport(Glibc)
import Glibc
#endif
import ImgdCore

/// An unlinked temporary file that a target fills with an input and hands to code that reads
/// files (the link-list reader, the file-backed image source, the configuration loader), so
/// those read through the same system calls as in the daemon. Each run makes its own: the
/// test suite replays several targets at once.
final class ScratchFile {
    /// The descriptor, open for reading and writing; the file has no name.
    let fileDescriptor: Int32

    /// A new, empty file.
    init() {
        var template = Array("/tmp/imgd-fuzz-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        precondition(fd >= 0, "cannot create a scratch file in /tmp: errno \(errno)")
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        fileDescriptor = fd
    }

    /// A new file holding `bytes`.
    convenience init(holding bytes: [UInt8]) {
        self.init()
        fill(with: bytes)
    }

    deinit { close(fileDescriptor) }

    /// Replaces the file's content with `bytes` and rewinds it.
    func fill(with bytes: [UInt8]) {
        precondition(ftruncate(fileDescriptor, 0) == 0)
        precondition(lseek(fileDescriptor, 0, SEEK_SET) == 0)
        do throws(WriteError) {
            try writeAll(fileDescriptor, bytes)
        } catch {
            preconditionFailure("cannot write the scratch file: \(error)")
        }
        precondition(lseek(fileDescriptor, 0, SEEK_SET) == 0)
    }

    /// A new descriptor of the file open for reading from its start, for a reader that closes
    /// what it is given.
    func openForReading() -> Int32 {
        let fd = open("/proc/self/fd/\(fileDescriptor)", O_RDONLY | O_CLOEXEC)
        precondition(fd >= 0, "cannot reopen the scratch file: errno \(errno)")
        return fd
    }

    /// A path that opens the file, for code that takes a path.
    var path: String { "/proc/self/fd/\(fileDescriptor)" }
}

import ImgdBase

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An `ImageByteSource` over an open file, read with `pread`.
///
/// `pread` leaves the descriptor's file offset alone, so the same descriptor can be shared with
/// code that writes or copies the file. The caller owns the descriptor and closes it.
public struct FileByteSource: ImageByteSource, Sendable {
    private let fileDescriptor: Int32
    /// The body's size as the caller knows it (e.g. from `fstat`); reads never go past it.
    public let count: Int

    public init(fileDescriptor: Int32, count: Int) {
        self.fileDescriptor = fileDescriptor
        self.count = max(0, count)
    }

    /// Throws `FileReadError` when `pread` fails. If the file is shorter than `count`, returns
    /// what is there, which validation then reports as a truncated body.
    public func bytes(at offset: Int, count wanted: Int) throws -> [UInt8] {
        guard offset >= 0, wanted > 0, offset < count else { return [] }
        let length = min(wanted, count - offset)
        return try [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            initialized = 0
            while initialized < length {
                let result = retryingOnInterrupt {
                    pread(fileDescriptor, buffer.baseAddress! + initialized, length - initialized, off_t(offset + initialized))
                }
                if result > 0 {
                    initialized += result
                } else if result == 0 {
                    break  // end of file
                } else {
                    throw FileReadError(errno: errno)
                }
            }
        }
    }
}

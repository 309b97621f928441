import CDescriptorPassing
import ImgdBase
import ImgdProtocol

#if canImport(Glibc)
import Glibc
#endif

/// What `imgctl get -o` does with the descriptor imgd passes (`get` with `"fd": true`): checks
/// the file it reads against the reply (size and SHA-256, hashed from a read-only mapping, no
/// copy in this process), then copies it in the kernel (`copy_file_range`, or `read`/`write`
/// where the file systems do not allow that).
enum DescriptorCopy {
    /// Checks that `descriptor` reads exactly the reply's `bytes` bytes with its `sha256`, and
    /// calls `body` with them mapped (nothing is mapped for an empty file).
    static func verified<T>(
        _ descriptor: Int32, result: JSONValue, _ body: (UnsafeRawBufferPointer) throws(ImgctlError) -> T
    ) throws(ImgctlError) -> T {
        guard let expected = result["bytes"]?.intValue, let digest = result["sha256"]?.stringValue else {
            throw .badReply("get: no \"bytes\" or \"sha256\" in \(result.jsonText)")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw .local("cannot read the descriptor imgd passed: \(ControlClient.describe(errno))")
        }
        guard Int(status.st_size) == expected else {
            throw .badReply("get: the descriptor reads \(status.st_size) bytes, the reply says \(expected)")
        }
        var mapped: UnsafeMutableRawPointer?
        if expected > 0 {
            let address = mmap(nil, expected, PROT_READ, MAP_PRIVATE, descriptor, 0)
            guard let address, address != MAP_FAILED else {
                throw .local("cannot map the descriptor imgd passed: \(ControlClient.describe(errno))")
            }
            mapped = address
        }
        defer { if let mapped { munmap(mapped, expected) } }
        let bytes = UnsafeRawBufferPointer(start: mapped, count: expected)
        guard ReplyDigest.hex(of: bytes) == digest.lowercased() else {
            throw .badReply("get: the SHA-256 of the descriptor's file is not the reply's \(digest)")
        }
        return try body(bytes)
    }

    /// Copies `size` bytes of `source` from its start into `target`; 0, or the errno that stopped it.
    static func copy(_ source: Int32, size: Int, into target: Int32) -> Int32 {
        var inOffset: Int64 = 0
        var left = size
        while left > 0 {
            let copied = imgd_copy_file_range(source, &inOffset, target, left)
            if copied > 0 {
                left -= copied
                continue
            }
            if copied < 0, errno == EINTR { continue }
            if copied < 0, [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP].contains(errno) { break }
            return copied == 0 ? EIO : errno
        }
        guard left > 0 else { return 0 }
        // copy_file_range refused (another file system, an old kernel): read and write.
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        while left > 0 {
            let count = chunk.withUnsafeMutableBytes { pread(source, $0.baseAddress, min($0.count, left), off_t(inOffset)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? EIO : errno }
            do throws(WriteError) {
                try writeAll(target, Array(chunk[0..<count]))
            } catch {
                return error.errno
            }
            inOffset += Int64(count)
            left -= count
        }
        return 0
    }
}

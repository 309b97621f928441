import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

/// A cache file opened for reading: its descriptor, which the caller owns and closes, and what
/// `fstat` said of it when it was opened.
public struct OpenedEntryFile: Sendable, Equatable {
    public let descriptor: Int32
    public let device: UInt64
    public let inode: UInt64
    public let size: Int
}

extension CacheDirectory {
    /// Opens `key`'s file read-only (a symlink is not followed); nil when there is none, or it
    /// is not a regular file. The descriptor keeps reading the file it opened whatever happens
    /// to the name later (an eviction unlinks it, a refresh renames a new file over it).
    public func openEntry(_ key: CacheKey) -> OpenedEntryFile? {
        let root = rootDescriptor
        let fd = key.withRelativePath { openat(root, $0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return nil
        }
        return OpenedEntryFile(descriptor: fd, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int(info.st_size))
    }

    /// Whether `key`'s name still leads to `file` (the same device and inode).
    func names(_ file: OpenedEntryFile, as key: CacheKey) -> Bool {
        var info = stat()
        let root = rootDescriptor
        guard key.withRelativePath({ fstatat(root, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else { return false }
        return UInt64(info.st_dev) == file.device && UInt64(info.st_ino) == file.inode
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// A failure of the on-disk cache. Each case names the path and the system's reason, so the
/// person reading it can fix permissions, free space or the folder itself.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A cache folder could not be created or opened.
    case cannotOpenFolder(path: String, errno: Int32)
    /// A temp file could not be created.
    case cannotCreateTempFile(path: String, errno: Int32)
    /// Writing a body to its temp file failed (ENOSPC lands here as `errno == ENOSPC`).
    case writeFailed(path: String, errno: Int32)
    /// Moving a complete file to its final name failed.
    case publishFailed(path: String, errno: Int32)

    /// The system error behind the failure.
    public var errno: Int32 {
        switch self {
        case .cannotOpenFolder(_, let code), .cannotCreateTempFile(_, let code),
            .writeFailed(_, let code), .publishFailed(_, let code):
            code
        }
    }

    /// True when the filesystem is out of space or inodes (or over quota).
    public var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }

    public var description: String {
        let reason = String(cString: strerror(errno))
        return switch self {
        case .cannotOpenFolder(let path, _): "cannot open cache folder \(path): \(reason)"
        case .cannotCreateTempFile(let path, _): "cannot create temp file in \(path): \(reason)"
        case .writeFailed(let path, _): "cannot write \(path): \(reason)"
        case .publishFailed(let path, _): "cannot move the finished file to \(path): \(reason)"
        }
    }
}

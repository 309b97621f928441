import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs, for a real ENOSPC or a filesystem made read-only at run time. Needs root (or CAP_SYS_ADMIN); tests that use it are skipped without.
public struct TmpfsMount {
    public let path: String

    public static let isAvailable: Bool = {
        guard getuid() == 0, let probe = try? TmpfsMount(bytes: 64 * 1024) else { return false }
        probe.unmount()
        return true
    }()

    public init(bytes: Int, inodes: Int? = nil) throws {
        path = try ScratchFolder("imgd-tmpfs").path
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(bytes)" + (inodes.map { ",nr_inodes=\($0)" } ?? "")) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(atPath: path)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EPERM)
        }
    }

    /// Grows or shrinks the filesystem in place (space given back to a full disk).
    public func resize(bytes: Int) throws {
        guard mount("tmpfs", path, "tmpfs", UInt(MS_REMOUNT), "size=\(bytes)") == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM)
        }
    }

    public func unmount() {
        umount2(path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(atPath: path)
    }
}

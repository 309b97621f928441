#if canImport(Glibc)
import Glibc
#endif

/// Creating folder paths, as `mkdir -p` does.
public enum Folders {
    /// Creates `path` and every missing parent (new folders get `mode`, less the umask).
    /// Returns nil on success, or the folder that could not be made and why.
    public static func make(_ path: String, mode: mode_t = 0o755) -> (path: String, errno: Int32)? {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, mode) != 0, errno != EEXIST { return (current, errno) }
        }
        return nil
    }
}

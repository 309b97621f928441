#if canImport(Glibc)
import Glibc
#endif

/// Why a link list could not be read (to the end): bad entries are ``LinkListEntry`` values, not
/// errors. Entries read before the error have already been returned.
public enum LinkListError: Error, Sendable, Equatable, CustomStringConvertible {
    /// open(2) failed, or the path is a folder.
    case cannotOpen(path: String, errno: Int32)
    /// read(2) failed part-way.
    case readFailed(path: String, errno: Int32)
    /// The file breaks its format's syntax at `line` (1-based): a JSON or plist syntax error,
    /// invalid UTF-8 in a JSON or plist list, a binary plist, or a bad `# pin:` header in a
    /// text list. Fix the file and drop it in again.
    case malformed(path: String, line: Int, reason: String)
    /// The reader's caller asked it to stop (``LinkListReader/init(fileDescriptor:path:format:byteLimit:isInterrupted:)``).
    case interrupted(path: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let code): "cannot open link list \(path): \(String(cString: strerror(code)))"
        case .readFailed(let path, let code): "cannot read link list \(path): \(String(cString: strerror(code)))"
        case .malformed(let path, let line, let reason): "\(path):\(line): malformed link list: \(reason)"
        case .interrupted(let path): "reading link list \(path) was interrupted"
        }
    }
}

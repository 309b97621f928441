/// Why a run could not start or could not be trusted. Each stops the program with a line on
/// stderr; the exit status is 2 for a bad command line, 3 when the daemon cannot be reached,
/// 1 otherwise.
enum LookupBenchError: Error, CustomStringConvertible {
    /// The command line is wrong; the text says how.
    case usage(String)
    /// The URL file cannot be opened.
    case cannotRead(String)
    /// The URL file holds no URL.
    case noURLs(String)
    /// The control socket cannot be connected to (path, errno text).
    case cannotConnect(String, String)

    var description: String {
        switch self {
        case .usage(let text): text
        case .cannotRead(let path): "cannot read the URL file \(path)"
        case .noURLs(let path): "no URL in \(path)"
        case .cannotConnect(let path, let reason): "cannot connect to \(path): \(reason)"
        }
    }

    var exitStatus: Int32 {
        switch self {
        case .usage: 2
        case .cannotConnect: 3
        case .cannotRead, .noURLs: 1
        }
    }
}

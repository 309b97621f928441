import ImgdCore

/// A failed request on the control socket: a `snake_case` ``code`` for scripts and a
/// ``message`` for a person. The codes are the protocol's (Protocol.md, *Protocol errors*); they
/// are mapped here and nowhere else.
public enum ControlError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `bad_request`: the line is not a JSON object, or its `cmd` is missing or not a string.
    case badRequest(String)
    /// `line_too_long`: a line over the limit; the connection is closed after the reply.
    case lineTooLong(limit: Int)
    /// `unknown_command`: `cmd` names no command (the command handler answers this).
    case unknownCommand(String)
    /// `invalid_argument`: an argument is missing, of the wrong type or out of range.
    case invalidArgument(field: String, reason: String)
    /// `too_many_requests`: more requests of the connection wait for replies than the limit.
    case tooManyRequests(limit: Int)
    /// `busy`: more connections than the limit; sent once, then the connection is closed.
    case busy(limit: Int)
    /// `busy`: the peer's user has `limit` connections open already (the per-peer cap); sent
    /// once, then the connection is closed.
    case busyPerPeer(uid: UInt32, limit: Int)
    /// `busy`: the peer's user has connections open and only the `reserved` connections kept
    /// for users with none are left of `limit`; sent once, then the connection is closed.
    case busyReserved(limit: Int, reserved: Int)
    /// `forbidden`: the command is one only root, imgd's own user and members of
    /// `admin-group` may run (`needed` says which, and why the peer is not one of them).
    case forbidden(String)
    /// `shutting_down`: the daemon is stopping.
    case shuttingDown
    /// `not_found`: the thing named does not exist (a list, a cache entry with `fetch: false`).
    case notFound(String)
    /// `queue_full`: the daemon already holds `requests` requests (`max-queued`) or
    /// `bytes` of their URLs (`max-queued-bytes`); nothing of this request was queued.
    case queueFull(requests: Int, bytes: Int)
    /// `queue_full` too: the member `uid` holds its share (`max-queued-share`, `percent` of the
    /// bounds: `requests` requests, `bytes` of URLs); nothing of this request was queued, and
    /// other members may still queue theirs.
    case queueShareFull(uid: UInt32, percent: Int, requests: Int, bytes: Int)
    /// `too_large`: `get` with `data: true` for an image over `max-data-bytes`; the file's
    /// `path` is the way to read it.
    case dataTooLarge(bytes: Int, limit: Int)
    /// `state_unavailable`: the daemon's state database (the lists and their progress) failed
    /// to answer `what` (`cause`: the database's error); nothing was done.
    case stateUnavailable(what: String, cause: String)
    /// `not_ready`: `wait-ready` reached its `timeout` before the hot set was cached; the
    /// message says what is missing (``ReadinessTracker/Snapshot/missing``).
    case notReady(String)
    /// Any other code, passed through as given: a download error (`dns`, `http_404`, …).
    case other(code: String, message: String)

    /// The protocol's `snake_case` code.
    public var code: String {
        switch self {
        case .badRequest: return "bad_request"
        case .lineTooLong: return "line_too_long"
        case .unknownCommand: return "unknown_command"
        case .invalidArgument: return "invalid_argument"
        case .tooManyRequests: return "too_many_requests"
        case .busy, .busyPerPeer, .busyReserved: return "busy"
        case .forbidden: return "forbidden"
        case .shuttingDown: return "shutting_down"
        case .notFound: return "not_found"
        case .queueFull, .queueShareFull: return "queue_full"
        case .dataTooLarge: return FailureCode.tooLarge.rawValue
        case .stateUnavailable: return "state_unavailable"
        case .notReady: return "not_ready"
        case .other(let code, _): return code
        }
    }

    /// What went wrong, for a person.
    public var message: String {
        switch self {
        case .badRequest(let reason):
            return reason
        case .lineTooLong(let limit):
            return "a line over \(limit) bytes; closing the connection"
        case .unknownCommand(let name):
            return "unknown command \"\(name)\"; see Protocol.md"
        case .invalidArgument(let field, let reason):
            return "invalid argument \"\(field)\": \(reason)"
        case .tooManyRequests(let limit):
            return "more than \(limit) requests waiting for their replies; this one was not run"
        case .busy(let limit):
            return "too many connections (\(limit)); try again later"
        case .busyPerPeer(let uid, let limit):
            return "uid \(uid) already has \(limit) connections open, the most one user may have "
                + "(max-connections-per-peer); close one or try again later"
        case .busyReserved(let limit, let reserved):
            return "too many connections: the last \(reserved) of \(limit) are kept for users with no connection open, "
                + "and yours has one; close one or try again later"
        case .forbidden(let reason):
            return reason
        case .shuttingDown:
            return "imgd is shutting down"
        case .notFound(let what):
            return what
        case .queueFull(let requests, let bytes):
            return "imgd holds as many queued requests as its limits allow (max-queued \(requests), max-queued-bytes \(bytes) of URLs); nothing of this request was queued: try again once some have finished"
        case .queueShareFull(let uid, let percent, let requests, let bytes):
            return "uid \(uid) holds its share of the queue (max-queued-share \(percent)%: \(requests) requests, \(bytes) bytes of URLs); nothing of this request was queued: try again once some of yours have finished"
        case .dataTooLarge(let bytes, let limit):
            return "the image is \(bytes) bytes, over the \(limit) bytes returned inline (max-data-bytes); ask without \"data\" and read the file at \"path\""
        case .stateUnavailable(let what, let cause):
            return "the state database failed while \(what): \(cause); nothing was done: try again (imgd logs the failure, and its lists wait until the database answers)"
        case .notReady(let missing):
            return "not ready: \(missing)"
        case .other(_, let message):
            return message
        }
    }

    public var description: String { "\(code): \(message)" }
}

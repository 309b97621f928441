/// What the spool tells the rest of the daemon (the event stream, the log).
public enum SpoolEvent: Sendable, Equatable {
    /// A list was claimed: `total` lines recorded.
    case listClaimed(name: String, total: Int)
    /// A list finished.
    case listDone(ListRecord)
    /// A URL of a list was downloaded (`format`: the image format's name, `png`; `servedBy`: the
    /// mirror it came from, when not the URL).
    case fetched(url: String, bytes: Int, format: String, servedBy: String? = nil)
    /// A URL of a list failed.
    case failed(url: String, code: String, message: String)
    /// A list's estimated finish passed its deadline (`atRisk`), or came back before it with
    /// room to spare (not `atRisk`): ``DeadlineTracker``.
    case deadline(name: String, readyBy: Int, estimate: DeadlineEstimate)
    /// A file in the spool was refused (not a regular file, unreadable).
    case refused(name: String, reason: String)
}

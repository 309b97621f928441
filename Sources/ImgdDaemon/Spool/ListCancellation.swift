/// What ``SpoolService/cancel(list:if:)`` did.
public enum ListCancellation: Sendable, Equatable {
    /// Cancelled; `pending` URLs were still to fetch.
    case cancelled(pending: Int)
    /// No list in progress has that name.
    case notFound
    /// Not allowed for this caller; `owner` is the uid that owned the list's file (nil: not recorded).
    case forbidden(owner: UInt32?)
}

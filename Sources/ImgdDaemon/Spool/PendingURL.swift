import ImgdCore

/// A list's URL still to be fetched, as the state database holds it: its place in the list,
/// the URL (normalised when it parsed) and its item's options (none for a plain URL).
public struct PendingURL: Sendable, Equatable {
    public let seq: Int
    public let url: String
    public let options: LinkListItemOptions
    /// When its signed URL expires (milliseconds since 1970; ``URLExpiry``), as read at the
    /// claim; nil when its URL states none.
    public var expiresAt: Int? = nil
}

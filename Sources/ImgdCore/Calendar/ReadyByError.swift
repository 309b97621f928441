/// Why a list's deadline (``ReadyBy``) cannot be read: the text as given and what is wrong.
public struct ReadyByError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text as it was written (cut when long).
    public let text: String
    public let reason: String

    public var description: String {
        "'\(text)' is not a deadline: \(reason); write an instant such as 2026-12-07T05:30:00Z or a local time of day such as 05:30"
    }
}

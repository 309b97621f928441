/// Why a size ("64 MiB") or a duration ("30m") from a flag, a configuration file or a control
/// command was not accepted.
///
/// The message quotes what was given and says what is accepted instead, so the person who
/// wrote it can correct it without reading the source:
/// `'12q' is not a size: expected a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)`.
public struct UnitParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What a text was meant to be.
    public enum Kind: String, Sendable, Equatable {
        /// A number of bytes (``ByteCount``).
        case size
        /// A span of time (`Duration.parsing(_:)`).
        case duration
    }

    /// The text as given.
    public let text: String
    /// What would have been accepted, completing "expected …".
    public let expected: String
    /// Whether a size or a duration was being read.
    public let kind: Kind

    /// An error for `text`, which should have been a `kind` matching `expected`.
    public init(text: String, expected: String, kind: Kind) {
        self.text = text
        self.expected = expected
        self.kind = kind
    }

    public var description: String { "'\(text)' is not a \(kind.rawValue): expected \(expected)" }
}

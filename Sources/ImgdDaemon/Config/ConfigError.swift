/// A setting that cannot be used, with where it came from.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `--flag`, `FILE:LINE`, or `FILE` when the file itself cannot be read.
    public let origin: String
    public let reason: String

    public var description: String { "\(origin): \(reason)" }
}

/// Why one value does not fit its setting.
struct SettingError: Error {
    let reason: String
}

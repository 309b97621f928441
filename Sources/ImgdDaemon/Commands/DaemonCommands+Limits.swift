extension DaemonCommands {
    /// URLs one `add` may carry: 10,000 by default (`max-add-urls`). More is `invalid_argument`,
    /// counted on the parsed line before any URL is taken out of it.
    static let defaultMaxAddURLs = 10_000

    /// The largest image `get` returns inline with `data: true`, counted on its bytes before
    /// base64: 4 MiB by default (`max-data-bytes`). A larger one is `too_large`: it would be held
    /// in memory twice (its bytes and their base64) and queued whole for the connection.
    static let defaultMaxDataBytes = 4 << 20
}

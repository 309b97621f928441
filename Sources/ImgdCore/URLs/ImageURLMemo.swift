/// URLs already parsed, by the text they were parsed from: a `get` for a URL asked before skips
/// libcurl's parser (a handle, a parse and four rebuilt parts; about a tenth of a memory-tier
/// hit's cost, measured).
///
/// Parsing is pure (the same text always gives the same ``ImageURL`` or the same error), so a
/// remembered URL is never stale; only successes are kept. At most ``capacity`` texts (4,096
/// by default) are kept: when it is full, it is emptied and fills again with the texts in use,
/// so a working set larger than it costs a parse per miss and nothing more. Texts longer than
/// ``longestKept`` are parsed every time, not kept: any member can send URLs of up to 8 KiB, and
/// 4,096 of them (each kept twice, as sent and normalised) would hold 64 MiB; with the bound the
/// memo holds about 8 MiB at most.
public final class ImageURLMemo: Sendable {
    /// Texts kept at most.
    public let capacity: Int
    /// The longest text kept, in bytes (signed image URLs run to a few hundred).
    public static let longestKept = 1024
    /// The texts kept, guarded by the lock; callers on any thread (the control server's event loops).
    private let parsed: Locked<[String: ImageURL]>

    public init(capacity: Int = 4096) {
        precondition(capacity > 0, "an ImageURLMemo must keep at least one URL")
        self.capacity = capacity
        parsed = Locked([:])
    }

    /// `text` parsed (see ``ImageURL/init(_:)``), from the memo when it was parsed before.
    public func url(_ text: String) throws(ImageURLError) -> ImageURL {
        if let known = parsed.withLock({ $0[text] }) { return known }
        let url = try ImageURL(text)
        guard text.utf8.count <= Self.longestKept else { return url }
        parsed.withLock { parsed in
            if parsed.count >= capacity { parsed.removeAll(keepingCapacity: true) }
            parsed[text] = url
        }
        return url
    }

    /// Texts kept now.
    public var count: Int { parsed.withLock { $0.count } }
}

import ImgdBase

/// When a cached entry is due for revalidation (the `refresh` setting, a list's `# refresh:`
/// header or `refresh` field, `add`'s and `get`'s `refresh` argument).
public enum RefreshRule: Sendable, Hashable, CustomStringConvertible {
    /// Never revalidated (the default): an entry is used as long as it is cached.
    case off
    /// Due once it was fetched or last revalidated this long ago, whatever its headers say
    /// (only `no-cache` makes it due sooner, and `immutable` not even that).
    case after(Duration)
    /// Due when the response's own lifetime (``ResponseFreshness``) has run out, but never
    /// sooner than `min-fresh` after it was fetched or revalidated.
    case respectHeaders

    /// Reads `off`, `respect-headers` or a duration (`1d`, `12h`: ``Swift/Duration/parsing(_:)``).
    public init(parsing text: String) throws(UnitParseError) {
        switch text.lowercased() {
        case "off": self = .off
        case "respect-headers": self = .respectHeaders
        default:
            let duration: Duration
            do {
                duration = try Duration.parsing(text)
            } catch {
                throw UnitParseError(text: text, expected: "off, respect-headers or a duration (1d, 12h, 30m)", kind: .duration)
            }
            self = .after(duration)
        }
    }

    /// As the setting is written: `off`, `respect-headers`, `1d`.
    public var description: String {
        switch self {
        case .off: "off"
        case .respectHeaders: "respect-headers"
        case .after(let duration): Duration.spelledForRefresh(duration)
        }
    }
}

extension Duration {
    /// The largest whole unit that spells `duration` exactly (`86400 s` → `1d`).
    static func spelledForRefresh(_ duration: Duration) -> String {
        let milliseconds = duration.wholeMilliseconds
        for (name, size) in [("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds >= size && milliseconds % size == 0 {
            return "\(milliseconds / size)\(name)"
        }
        return "\(milliseconds)ms"
    }

    /// Whole milliseconds (rounded down), saturating.
    public var wholeMilliseconds: Int {
        let parts = components
        let (product, overflow) = Int(parts.seconds).multipliedReportingOverflow(by: 1000)
        return overflow ? Int.max : product + Int(parts.attoseconds / 1_000_000_000_000_000)
    }
}

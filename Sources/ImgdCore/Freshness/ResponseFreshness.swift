/// What a response says about how long it may be used without asking the origin again: its
/// `Cache-Control` directives (`max-age`, `s-maxage`, `no-cache`, `no-store`, `immutable`),
/// `Expires`, `Date` and `Age`. Read on the transfer thread from the final response's headers.
public struct ResponseFreshness: Sendable, Equatable {
    /// How long the response is fresh from when it was generated, in milliseconds: `s-maxage`
    /// (imgd is a shared cache, so it wins), else `max-age`, else `Expires` minus `Date` (or
    /// minus the time it arrived, without a `Date`). Nil when the response gives no lifetime.
    public var lifetimeMilliseconds: Int?
    /// The `Age` header, in milliseconds: time the response already spent in caches upstream.
    public var ageMilliseconds: Int
    /// `no-cache`: the entry may be stored but must be revalidated before each use.
    public var noCache: Bool
    /// `no-store`: the response must not be stored at all (`not_cacheable`).
    public var noStore: Bool
    /// `immutable`: the body will not change while fresh; never revalidated before `refresh`.
    public var immutable: Bool
    /// Whether the response carried `Cache-Control` or `Expires` at all; a `304` without them
    /// leaves the entry's stored lifetime as it was.
    public var hasDirectives: Bool

    public init(
        lifetimeMilliseconds: Int? = nil, ageMilliseconds: Int = 0, noCache: Bool = false, noStore: Bool = false,
        immutable: Bool = false, hasDirectives: Bool = false
    ) {
        self.lifetimeMilliseconds = lifetimeMilliseconds
        self.ageMilliseconds = ageMilliseconds
        self.noCache = noCache
        self.noStore = noStore
        self.immutable = immutable
        self.hasDirectives = hasDirectives
    }

    /// No header at all.
    public static let none = ResponseFreshness()

    /// Longest header value read (a longer one is ignored, as if absent).
    public static let maximumHeaderBytes = 4096

    /// Reads the headers of a response that arrived at `receivedAt` (milliseconds since 1970).
    /// Unknown directives are ignored; a malformed `Expires` means already expired (RFC 9111).
    public init(cacheControl: String?, expires: String?, date: String?, age: String?, receivedAt: Int) {
        self.init()
        var maxAge: Int?, sharedMaxAge: Int?
        if let cacheControl, cacheControl.utf8.count <= Self.maximumHeaderBytes {
            hasDirectives = true
            for directive in cacheControl.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1)
                let name = parts.first.map { $0.trimmingSpaces().lowercased() } ?? ""
                let value = parts.count > 1 ? parts[1].trimmingSpaces().trimmingQuotes() : nil
                switch name {
                case "max-age": maxAge = value.flatMap(Self.seconds)
                case "s-maxage": sharedMaxAge = value.flatMap(Self.seconds)
                case "no-cache": noCache = true
                case "no-store": noStore = true
                case "immutable": immutable = true
                default: break
                }
            }
        }
        if let seconds = sharedMaxAge ?? maxAge {
            lifetimeMilliseconds = seconds * 1000
        } else if let expires {
            hasDirectives = true
            if let until = HTTPDate.milliseconds(expires) {
                let generated = date.flatMap(HTTPDate.milliseconds) ?? receivedAt
                lifetimeMilliseconds = max(0, until - generated)
            } else {
                lifetimeMilliseconds = 0
            }
        }
        ageMilliseconds = (age.flatMap { Self.seconds(Substring($0)) } ?? 0) * 1000
    }

    /// A delta-seconds value; one too large for a year count of milliseconds is capped at
    /// 2^31 s (RFC 9111's advice), one that is not a number is ignored.
    private static func seconds(_ text: Substring) -> Int? {
        let digits = text.trimmingSpaces()
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return digits.count > 10 ? 1 << 31 : min(Int(digits) ?? 1 << 31, 1 << 31)
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }

    fileprivate func trimmingQuotes() -> Substring {
        guard count >= 2, first == "\"", last == "\"" else { return self }
        return dropFirst().dropLast()
    }
}

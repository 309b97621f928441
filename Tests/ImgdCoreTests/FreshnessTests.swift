import ImgdCore
import ImgdTestSupport
import Testing

/// The freshness rules: what a response's headers make of its lifetime, and when an entry is
/// due for revalidation under each `refresh` rule.
@Suite("Freshness: response headers and due rules", .offThePool)
struct FreshnessTests {
    /// 2026-01-01 00:00:00 UTC, in milliseconds.
    static let t0 = 1_767_225_600_000
    static let minute = 60_000, hour = 3_600_000, day = 86_400_000

    static func response(cc: String? = nil, expires: String? = nil, date: String? = nil, age: String? = nil) -> ResponseFreshness {
        ResponseFreshness(cacheControl: cc, expires: expires, date: date, age: age, receivedAt: t0)
    }

    static func entry(_ response: ResponseFreshness) -> EntryFreshness { EntryFreshness(response, receivedAt: t0) }

    @Test("HTTP dates in the three forms RFC 9110 names; garbage and over-long texts are nil")
    func httpDates() {
        #expect(HTTPDate.milliseconds("Thu, 01 Jan 2026 00:00:00 GMT") == Self.t0)
        #expect(HTTPDate.milliseconds("Thursday, 01-Jan-26 00:00:00 GMT") == Self.t0)
        #expect(HTTPDate.milliseconds("Thu Jan  1 00:00:00 2026") == Self.t0)
        #expect(HTTPDate.milliseconds("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777_000)
        #expect(HTTPDate.milliseconds("0") == nil)
        #expect(HTTPDate.milliseconds("tomorrow") == nil)
        #expect(HTTPDate.milliseconds(String(repeating: "1", count: 65)) == nil)
    }

    @Test("max-age: not due before its end, due after; s-maxage wins over max-age; Age is subtracted")
    func maxAgeRules() {
        let plain = Self.entry(Self.response(cc: "public, max-age=600"))
        #expect(!plain.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + 9 * Self.minute))
        #expect(plain.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + 10 * Self.minute))

        let shared = Self.entry(Self.response(cc: "max-age=60, s-maxage=3600"))
        #expect(!shared.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + 30 * Self.minute))
        #expect(shared.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + Self.hour))

        let aged = Self.entry(Self.response(cc: "max-age=600", age: "540"))
        #expect(aged.freshUntil == Self.t0 + Self.minute)
        #expect(!aged.isDue(under: .respectHeaders, minFresh: .zero, now: Self.t0 + Self.minute - 1))
        #expect(aged.isDue(under: .respectHeaders, minFresh: .zero, now: Self.t0 + Self.minute))
        // An Age over the lifetime leaves nothing: due at once.
        let stale = Self.entry(Self.response(cc: "max-age=60", age: "600"))
        #expect(stale.isDue(under: .respectHeaders, minFresh: .zero, now: Self.t0))
    }

    @Test("Expires counts from Date; without Cache-Control it gives the lifetime; a bad Expires is already expired")
    func expiresRules() {
        let expires = Self.entry(Self.response(expires: "Thu, 01 Jan 2026 02:00:00 GMT", date: "Thu, 01 Jan 2026 01:00:00 GMT"))
        #expect(expires.freshUntil == Self.t0 + Self.hour)
        #expect(!expires.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + 59 * Self.minute))
        #expect(expires.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + Self.hour))
        // max-age wins over Expires.
        let both = Self.entry(Self.response(cc: "max-age=60", expires: "Thu, 01 Jan 2026 02:00:00 GMT"))
        #expect(both.freshUntil == Self.t0 + Self.minute)
        let bad = Self.response(expires: "0")
        #expect(bad.lifetimeMilliseconds == 0)
        #expect(Self.entry(bad).isDue(under: .respectHeaders, minFresh: .zero, now: Self.t0))
    }

    @Test("min-fresh is the floor of a short or missing lifetime")
    func minFreshFloor() {
        let short = Self.entry(Self.response(cc: "max-age=5"))
        #expect(!short.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + 30_000))
        #expect(short.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + Self.minute))
        let none = Self.entry(.none)
        #expect(!none.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + Self.minute - 1))
        #expect(none.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0 + Self.minute))
    }

    @Test("no-cache makes every use due (under any rule but off); immutable is never due before refresh")
    func noCacheAndImmutable() {
        let noCache = Self.entry(Self.response(cc: "no-cache, max-age=3600"))
        #expect(noCache.noCache)
        #expect(noCache.isDue(under: .respectHeaders, minFresh: .seconds(60), now: Self.t0))
        #expect(noCache.isDue(under: .after(.seconds(86_400)), minFresh: .seconds(60), now: Self.t0))
        #expect(!noCache.isDue(under: .off, minFresh: .seconds(60), now: Self.t0 + 365 * Self.day))

        let immutable = Self.entry(Self.response(cc: "max-age=60, immutable"))
        #expect(!immutable.isDue(under: .after(.seconds(86_400)), minFresh: .zero, now: Self.t0 + Self.day - 1))
        #expect(immutable.isDue(under: .after(.seconds(86_400)), minFresh: .zero, now: Self.t0 + Self.day))
        // Immutable without a lifetime is never due under respect-headers; no-cache does not undo it.
        let forever = Self.entry(Self.response(cc: "immutable, no-cache"))
        #expect(!forever.isDue(under: .respectHeaders, minFresh: .zero, now: Self.t0 + 365 * Self.day))
        #expect(!forever.isDue(under: .after(.seconds(3600)), minFresh: .zero, now: Self.t0 + Self.hour - 1))
    }

    @Test("a duration rule ignores the headers' lifetime; off is never due")
    func durationAndOff() {
        let long = Self.entry(Self.response(cc: "max-age=31536000"))
        #expect(!long.isDue(under: .after(.seconds(86_400)), minFresh: .zero, now: Self.t0 + Self.day - 1))
        #expect(long.isDue(under: .after(.seconds(86_400)), minFresh: .zero, now: Self.t0 + Self.day))
        let expired = Self.entry(Self.response(cc: "max-age=0"))
        #expect(!expired.isDue(under: .off, minFresh: .zero, now: Self.t0 + 365 * Self.day))
        // A request's own rule wins over the daemon's.
        let policy = RefreshPolicy(rule: .off)
        #expect(!policy.isDue(expired, now: Self.t0 + Self.hour))
        #expect(policy.isDue(expired, override: .after(.seconds(60)), now: Self.t0 + Self.hour))
    }

    @Test("a 304 with headers takes them; one without keeps the stored lifetime, counted from now")
    func revalidation() {
        let stored = Self.entry(Self.response(cc: "max-age=600"))
        let later = Self.t0 + Self.hour
        let renewed = stored.revalidated(by: .none, at: later)
        #expect(renewed.validatedAt == later)
        #expect(renewed.freshUntil == later + 10 * Self.minute)
        let replaced = stored.revalidated(by: ResponseFreshness(cacheControl: "max-age=60", expires: nil, date: nil, age: nil, receivedAt: later), at: later)
        #expect(replaced.freshUntil == later + Self.minute)
    }

    @Test("no-store, unknown directives, quoted and malformed values")
    func directives() {
        #expect(Self.response(cc: "no-store").noStore)
        #expect(Self.response(cc: "NO-STORE , private").noStore)
        #expect(Self.response(cc: "max-age=\"120\"").lifetimeMilliseconds == 120_000)
        #expect(Self.response(cc: "max-age=abc").lifetimeMilliseconds == nil)
        #expect(Self.response(cc: "max-age=99999999999999999999").lifetimeMilliseconds == (1 << 31) * 1000)
        #expect(Self.response(cc: "community=\"UCI\"").lifetimeMilliseconds == nil)
        #expect(Self.response(cc: String(repeating: "x", count: 5000) + ", no-store").noStore == false)
    }

    @Test("refresh rules parse and print as written; bad ones say what they take")
    func ruleParsing() throws {
        #expect(try RefreshRule(parsing: "off") == .off)
        #expect(try RefreshRule(parsing: "Respect-Headers") == .respectHeaders)
        #expect(try RefreshRule(parsing: "1d") == .after(.seconds(86_400)))
        #expect(try RefreshRule(parsing: "90m").description == "90m")
        #expect(try RefreshRule(parsing: "86400").description == "1d")
        #expect(throws: UnitParseError.self) { try RefreshRule(parsing: "sometimes") }
    }
}

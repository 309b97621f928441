import ImgdCore
import Testing

/// What a response built from a cached entry says of it: HTTP dates written as IMF-fixdate, the
/// instant an entry falls due, the media type of each format.
@Suite("Response facts: HTTP dates written, due instants, media types", .offThePool)
struct HTTPDateFormatTests {
    @Test("IMF-fixdate: RFC 9110's example, the epoch, leap days, a day's last second; milliseconds dropped; before 1970 is the epoch")
    func formats() {
        #expect(HTTPDate.format(milliseconds: 784_111_777_000) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(milliseconds: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(milliseconds: 1_767_225_600_999) == "Thu, 01 Jan 2026 00:00:00 GMT")
        #expect(HTTPDate.format(milliseconds: 951_782_400_000) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.format(milliseconds: 1_709_251_199_000) == "Thu, 29 Feb 2024 23:59:59 GMT")
        #expect(HTTPDate.format(milliseconds: -5_000) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test("what format writes, milliseconds reads back, to the second, over two centuries of days")
    func roundTrips() {
        var instant = 0
        // Every 7 days and 3,661 s for about 230 years: each weekday, month and year boundary.
        while instant < 7_258_118_400_000 {
            let text = HTTPDate.format(milliseconds: instant)
            #expect(HTTPDate.milliseconds(text) == instant / 1000 * 1000, "\(text)")
            instant += 7 * 86_400_000 + 3_661_000
        }
    }

    @Test("dueAt is the first instant isDue holds, under every rule and header combination; nil when it never does")
    func dueAtAgreesWithIsDue() throws {
        let t0 = 1_767_225_600_000, hour = 3_600_000
        let rules: [RefreshRule] = [.off, .after(.seconds(3600)), .after(.zero), .respectHeaders]
        let entries = [
            EntryFreshness(validatedAt: t0),
            EntryFreshness(validatedAt: t0, freshUntil: t0 + 2 * hour),
            EntryFreshness(validatedAt: t0, freshUntil: t0 - hour),
            EntryFreshness(validatedAt: t0, noCache: true),
            EntryFreshness(validatedAt: t0, noCache: true, immutable: true),
            EntryFreshness(validatedAt: t0, immutable: true),
            EntryFreshness(validatedAt: t0, freshUntil: t0 + 2 * hour, immutable: true),
        ]
        for rule in rules {
            for entry in entries {
                for minFresh in [Duration.zero, .seconds(60), .seconds(3 * 3600)] {
                    let context = "\(rule) \(entry) min-fresh \(minFresh)"
                    guard let dueAt = entry.dueAt(under: rule, minFresh: minFresh) else {
                        for now in [t0 - hour, t0, t0 + 10 * hour, Int.max / 2] {
                            #expect(!entry.isDue(under: rule, minFresh: minFresh, now: now), "\(context) at \(now)")
                        }
                        continue
                    }
                    #expect(entry.isDue(under: rule, minFresh: minFresh, now: max(dueAt, t0 - hour)), "\(context)")
                    if dueAt > Int.min {
                        #expect(!entry.isDue(under: rule, minFresh: minFresh, now: dueAt - 1), "\(context)")
                    }
                }
            }
        }
        // A duration past the end of time: never due, not an overflow.
        let entry = EntryFreshness(validatedAt: t0)
        #expect(entry.dueAt(under: .after(.seconds(Int64.max / 1000)), minFresh: .zero) == nil)
        #expect(!entry.isDue(under: .after(.seconds(Int64.max / 1000)), minFresh: .zero, now: Int.max))
    }

    @Test("every format has an image/ media type, each its own")
    func mediaTypes() {
        let types = ImageFormat.allCases.map(\.mediaType)
        #expect(types.allSatisfy { $0.hasPrefix("image/") })
        #expect(Set(types).count == ImageFormat.allCases.count)
        #expect(ImageFormat.png.mediaType == "image/png" && ImageFormat.svg.mediaType == "image/svg+xml")
    }

    @Test("an IMF-fixdate's shape is recognised without reading it: what format writes is, obsolete forms and control characters are not")
    func imfShape() {
        #expect(HTTPDate.looksLikeIMFFixdate(HTTPDate.format(milliseconds: 1_700_000_000_000)))
        #expect(HTTPDate.looksLikeIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(!HTTPDate.looksLikeIMFFixdate("Sunday, 06-Nov-94 08:49:37 GMT"))
        #expect(!HTTPDate.looksLikeIMFFixdate("Sun Nov  6 08:49:37 1994"))
        #expect(!HTTPDate.looksLikeIMFFixdate("Sun, 06 Nov 1994 08:49:37 UTC"))
        #expect(!HTTPDate.looksLikeIMFFixdate("Sun, 06 Nov 1994 08:49:3\r GMT"))
        #expect(!HTTPDate.looksLikeIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT "))
    }
}

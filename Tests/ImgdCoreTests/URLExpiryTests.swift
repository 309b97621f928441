import ImgdCore
import Testing

/// When a signed URL stops working, read from its query: each form exactly, names in any case,
/// and everything malformed, ambiguous or hostile read as "no known expiry" (never a failure).
@Suite("Signed URLs' expiry", .offThePool)
struct URLExpiryTests {
    /// 2026-12-07T05:30:00Z.
    static let dawn = 1_796_621_400_000

    static func expiry(_ text: String) -> URLExpiry? { URLExpiry(urlText: text) }

    @Test("S3 SigV4: X-Amz-Date plus X-Amz-Expires seconds; AWS's own example URL; names in any case")
    func amazonV4() throws {
        // AWS's documented presigned URL (2013-05-24T00:00:00Z, 86400 s).
        let aws = "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            + "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            + "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            + "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        let found = try #require(Self.expiry(aws))
        #expect(found.milliseconds == 1_369_353_600_000 + 86_400_000)
        #expect(found.form == .amazonV4)
        #expect(found.iso8601 == "2013-05-25T00:00:00Z")
        #expect(Self.expiry("https://h/x.png?x-amz-date=20261207T050000Z&X-AMZ-EXPIRES=1800")?.milliseconds == Self.dawn)
        #expect(Self.expiry("https://h/x.png?X-Amz-Expires=0&X-Amz-Date=20261207T053000Z")?.milliseconds == Self.dawn)
        // Either half alone says nothing.
        #expect(Self.expiry("https://h/x.png?X-Amz-Date=20261207T053000Z") == nil)
        #expect(Self.expiry("https://h/x.png?X-Amz-Expires=3600") == nil)
    }

    @Test("GCS V4: X-Goog-Date plus X-Goog-Expires, as Amazon's")
    func google() throws {
        let found = try #require(Self.expiry(
            "https://storage.googleapis.com/b/o.jpg?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20261207T043000Z"
                + "&X-Goog-Expires=3600&X-Goog-Signature=abc"))
        #expect(found.milliseconds == Self.dawn)
        #expect(found.form == .google)
    }

    @Test("CloudFront and S3 SigV2: Expires epoch seconds, beside a Signature only")
    func expires() throws {
        let found = try #require(Self.expiry(
            "https://d111111abcdef8.cloudfront.net/image.jpg?Expires=1796621400&Signature=abc~def&Key-Pair-Id=K2JCJMDEHXQW5F"))
        #expect(found.milliseconds == Self.dawn)
        #expect(found.form == .expires)
        #expect(Self.expiry("https://b.s3.amazonaws.com/k?AWSAccessKeyId=A&expires=1796621400&signature=x%2By")?.milliseconds == Self.dawn)
        // `expires` is an ordinary word: without a signature beside it, nothing is read.
        #expect(Self.expiry("https://shop.example/banner.png?expires=1796621400") == nil)
    }

    @Test("Azure SAS: se in every ISO 8601 shape Azure takes, percent-encoded or not, beside a sig only")
    func azure() {
        let base = "https://acct.blob.core.windows.net/c/b.png?sv=2022-11-02&sr=b&sp=r&sig=abc%3D&se="
        #expect(Self.expiry(base + "2026-12-07T05:30:00Z")?.milliseconds == Self.dawn)
        #expect(Self.expiry(base + "2026-12-07T05%3A30%3A00Z")?.milliseconds == Self.dawn)
        #expect(Self.expiry(base + "2026-12-07T05:30Z")?.milliseconds == Self.dawn)
        #expect(Self.expiry(base + "2026-12-07T05:30:00.1234567Z")?.milliseconds == Self.dawn)
        #expect(Self.expiry(base + "2026-12-07T06:30:00+01:00")?.milliseconds == Self.dawn)
        #expect(Self.expiry(base + "2026-12-07T04:30:00-01:00")?.milliseconds == Self.dawn)
        #expect(Self.expiry(base + "2026-12-07")?.milliseconds == 1_796_601_600_000)
        #expect(Self.expiry(base + "2026-12-07")?.form == .azure)
        #expect(Self.expiry("https://search.example/img.png?q=cats&se=2026-12-07") == nil)
    }

    @Test("several forms: the earliest counts; a parameter given twice makes its form unknown; the fragment is not the query")
    func combinations() {
        let both = "https://h/x?X-Amz-Date=20261207T053000Z&X-Amz-Expires=60&Expires=1796621400&Signature=s"
        #expect(Self.expiry(both)?.milliseconds == Self.dawn)
        #expect(Self.expiry(both)?.form == .expires)
        #expect(Self.expiry("https://h/x?Expires=1796621400&Expires=1&Signature=s") == nil)
        #expect(Self.expiry("https://h/x?Expires=1796621400&Signature=s&X-Amz-Date=20261207T053000Z&x-amz-date=20261207T053000Z&X-Amz-Expires=5")?
            .form == .expires)
        #expect(Self.expiry("https://h/x#?Expires=1796621400&Signature=s") == nil)
        #expect(Self.expiry("https://h/x?Expires=1796621400&Signature=s#frag")?.milliseconds == Self.dawn)
    }

    @Test("garbage and hostile values mean no known expiry, never a crash", arguments: [
        "https://h/x.png",
        "https://h/x.png?",
        "https://h/x.png?&&&==&",
        "https://h/x.png?Expires=&Signature=s",
        "https://h/x.png?Expires=-5&Signature=s",
        "https://h/x.png?Expires=+1796621400&Signature=s",
        "https://h/x.png?Expires=1796621400.5&Signature=s",
        "https://h/x.png?Expires=17966214000000&Signature=s",
        "https://h/x.png?Expires=%31%3&Signature=s",
        "https://h/x.png?Expires=%FF%FE&Signature=s",
        "https://h/x.png?Expires=1796621400%00&Signature=s",
        "https://h/x.png?X-Amz-Date=20261307T053000Z&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=20260230T053000Z&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=20261207T243000Z&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=20261207T053060Z&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=20261207T053000&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=2026-12-07T05:30:00Z&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=19691231T235959Z&X-Amz-Expires=60",
        "https://h/x.png?X-Amz-Date=20261207T053000Z&X-Amz-Expires=99999999999",
        "https://h/x.png?X-Amz-Date=20261207T053000Z&X-Amz-Expires=1e5",
        "https://h/x.png?X-Amz-Date=٢٠٢٦١٢٠٧T053000Z&X-Amz-Expires=60",
        "https://h/x.png?sig=s&se=2026-12-07T05:30:00",
        "https://h/x.png?sig=s&se=2026-12-07T05:30:00ZZ",
        "https://h/x.png?sig=s&se=2026-12-07T05:30:00+25:00",
        "https://h/x.png?sig=s&se=2026-12-07T05:30:00.Z",
        "https://h/x.png?sig=s&se=2026-12-07T05:30:00.1234567890Z",
        "https://h/x.png?sig=s&se=2026-12-7",
        "https://h/x.png?sig=s&se=2026-12-07T5:30Z",
        "https://h/x.png?sig=s&se=tomorrow",
        "https://h/x.png?sig=s&se=" + String(repeating: "9", count: 5000),
        "https://h/x.png?Expires=" + String(repeating: "1", count: 200) + "&Signature=s",
    ])
    func garbage(_ text: String) {
        #expect(Self.expiry(text) == nil, "\(text.prefix(120))")
    }

    @Test("expired means at or before now; ISO 8601 to the second, the epoch for earlier instants")
    func expiredAndWritten() {
        let expiry = URLExpiry(milliseconds: Self.dawn, form: .expires)
        #expect(expiry.isExpired(at: Self.dawn))
        #expect(expiry.isExpired(at: Self.dawn + 1))
        #expect(!expiry.isExpired(at: Self.dawn - 1))
        #expect(URLExpiry.iso8601(milliseconds: 1_709_251_199_999) == "2024-02-29T23:59:59Z")
        #expect(URLExpiry.iso8601(milliseconds: -1) == "1970-01-01T00:00:00Z")
        #expect(expiry.description == "2026-12-07T05:30:00Z (Expires)")
    }

    @Test("every instant from 1970 to 9999 written in each form reads back to the second; random bytes in the values never read as an expiry they do not spell")
    func roundTripsAndNoise() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let seconds = Int.random(in: 0..<253_402_300_800, using: &generator)
            let iso = URLExpiry.iso8601(milliseconds: seconds * 1000)
            let amzDate = iso.filter { $0 != "-" && $0 != ":" }
            #expect(Self.expiry("https://h/x?X-Amz-Date=\(amzDate)&X-Amz-Expires=0")?.milliseconds == seconds * 1000, "\(iso)")
            #expect(Self.expiry("https://h/x?sig=s&se=\(iso)")?.milliseconds == seconds * 1000, "\(iso)")
            #expect(Self.expiry("https://h/x?Signature=s&Expires=\(seconds)")?.milliseconds == seconds * 1000)
            // A byte other than a digit in the seconds makes the value unknown.
            var noisy = Array(String(seconds).utf8)
            // Punctuation that is not a query's own (`&`, `#`, `%`).
            let noise: [UInt8] = [0x21, 0x22, 0x24, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x2D, 0x2E, 0x2F, 0x3A, 0x3B, 0x41, 0x7A]
            noisy[Int.random(in: 0..<noisy.count, using: &generator)] = noise.randomElement(using: &generator)!
            let text = String(decoding: noisy, as: UTF8.self)
            #expect(Self.expiry("https://h/x?Signature=s&Expires=\(text)") == nil, "\(text)")
        }
    }

    @Test("read from an ImageURL's normalised text, as the engine and the spool read it")
    func fromImageURL() throws {
        let url = try ImageURL("HTTPS://Example.COM:443/a.png?X-Amz-Date=20261207T053000Z&X-Amz-Expires=0#frag")
        #expect(URLExpiry(url)?.milliseconds == Self.dawn)
    }
}

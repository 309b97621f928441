import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The one list of headers a transfer sends: the validators of a revalidation, and nothing a
/// stored (origin-controlled) value could smuggle in.
@Suite("Request headers", .offThePool)
struct RequestHeadersTests {
    @Test("validators become If-None-Match and If-Modified-Since; none, no headers")
    func validators() {
        let both = RequestHeaders(validators: Validators(etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT"))
        #expect(both.lines == ["If-None-Match: \"v1\"", "If-Modified-Since: Wed, 21 Oct 2015 07:28:00 GMT"])
        #expect(RequestHeaders(validators: Validators(etag: nil, lastModified: "x")).lines == ["If-Modified-Since: x"])
        #expect(RequestHeaders(validators: nil).isEmpty)
        #expect(CurlHeaderList(both.lines)?.list != nil)
        let withHost = RequestHeaders(host: ["Authorization: Bearer t"], validators: Validators(etag: "\"v1\"", lastModified: nil))
        #expect(withHost.lines == ["Authorization: Bearer t", "If-None-Match: \"v1\""])
    }

    @Test("a value with CR, LF or NUL, an empty one and an over-long one are dropped, never sent")
    func hostileValues() {
        var headers = RequestHeaders()
        headers.add("If-None-Match", "\"a\"\r\nAuthorization: Bearer stolen")
        headers.add("If-None-Match", "\"a\"\nX: y")
        headers.add("If-None-Match", "a\u{0}b")
        headers.add("If-None-Match", "")
        headers.add("If-None-Match", String(repeating: "a", count: RequestHeaders.maximumValueBytes + 1))
        #expect(headers.isEmpty)
        headers.add("If-None-Match", String(repeating: "a", count: RequestHeaders.maximumValueBytes))
        #expect(headers.lines.count == 1)
    }

    @Test("a configured header value of 8 KiB is taken; one byte more is refused naming the header and the bound, never the value")
    func configuredValueBound() throws {
        #expect(RequestHeader.maximumValueBytes == 8192)
        let atLimit = String(repeating: "t", count: RequestHeader.maximumValueBytes)
        let header = try RequestHeader(name: "Authorization", value: atLimit)
        #expect(header.line == "Authorization: " + atLimit)
        let secret = "s3cr3t" + String(repeating: "t", count: RequestHeader.maximumValueBytes - 5)
        #expect(throws: RequestHeaderError(name: "Authorization", reason: "has a value longer than 8192 bytes")) {
            try RequestHeader(name: "Authorization", value: secret)
        }
        do {
            _ = try RequestHeader(name: "Authorization", value: secret)
        } catch {
            #expect(!"\(error)".contains("s3cr3t"), "\(error)")
        }
    }
}

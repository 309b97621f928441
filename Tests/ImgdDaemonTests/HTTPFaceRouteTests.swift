import NIOHTTP1
@testable import ImgdDaemon
import Testing

/// The HTTP face's reading of a request, without a socket: routes, query parameters, ranges,
/// entity tags, the browser rule and listen addresses.
@Suite("HTTP face: routes, ranges, tags")
struct HTTPFaceRouteTests {
    private func route(_ target: String, method: HTTPMethod = .GET, headers: [(String, String)] = []) -> Result<HTTPFaceRoute, HTTPFaceError> {
        HTTPFaceRoute.of(HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: HTTPHeaders(headers)))
    }

    @Test("/image: url decoded, + kept, options read, unknown parameters ignored; fetch must be 0 or 1")
    func imageQuery() throws {
        let parsed = try route("/image?url=https%3A%2F%2Fa.example%2Fx+y.png%3Fsig%3Dab%2Bc&key=k1&sha256=00&fetch=0&refresh=1h&size=9").get()
        #expect(parsed == .image(ImageQuery(url: "https://a.example/x+y.png?sig=ab+c", key: "k1", sha256: "00", fetch: false, refresh: "1h")))
        #expect(throws: HTTPFaceError.self) { try route("/image?url=a&fetch=yes").get() }
        #expect(throws: HTTPFaceError.self) { try route("/image").get() }
        #expect(throws: HTTPFaceError.self) { try route("/image?url=%E2%28").get() }  // not UTF-8
        #expect(throws: HTTPFaceError.self) { try route("/image?url=%4").get() }
    }

    @Test("the path form keeps the origin's target untouched and takes options from headers")
    func pathForm() throws {
        let parsed = try route("/https/cdn.example:8443/a%20b/c.jpg?w=1&sig=x+y", headers: [("X-Imgd-Fetch", "0"), ("X-Imgd-Key", "mine")]).get()
        #expect(parsed == .image(ImageQuery(url: "https://cdn.example:8443/a%20b/c.jpg?w=1&sig=x+y", key: "mine", fetch: false)))
        #expect(try route("/http/h").get() == .image(ImageQuery(url: "http://h")))
        #expect((try? route("/https//x").get()) == nil)
        #expect((try? route("/https/u@h/x").get()) == nil)
        #expect((try? route("/ftp/h/x").get()) == nil)
    }

    @Test("only GET and HEAD; origin-form targets only; fixed routes")
    func methodsAndTargets() throws {
        #expect(throws: HTTPFaceError.methodNotAllowed("POST")) { try route("/metrics", method: .POST).get() }
        #expect((try? route("http://a/b").get()) == nil)
        #expect((try? route("*").get()) == nil)
        #expect(try route("/metrics").get() == .metrics)
        #expect(try route("/healthz?x=1", method: .HEAD).get() == .healthz)
        #expect(try route("/readyz").get() == .readyz)
        #expect((try? route("/other").get()) == nil)
    }

    @Test("Range: one range served, several or unreadable ones mean the whole image, past the end is unsatisfiable")
    func ranges() {
        #expect(ByteRangeRequest.of(nil, size: 100) == .whole)
        #expect(ByteRangeRequest.of("bytes=0-9", size: 100) == .partial(0..<10))
        #expect(ByteRangeRequest.of("bytes=90-200", size: 100) == .partial(90..<100))
        #expect(ByteRangeRequest.of("bytes=95-", size: 100) == .partial(95..<100))
        #expect(ByteRangeRequest.of("bytes=-10", size: 100) == .partial(90..<100))
        #expect(ByteRangeRequest.of("bytes=-1000", size: 100) == .partial(0..<100))
        #expect(ByteRangeRequest.of("bytes=100-", size: 100) == .unsatisfiable)
        #expect(ByteRangeRequest.of("bytes=-0", size: 100) == .unsatisfiable)
        #expect(ByteRangeRequest.of("bytes=0-1,5-6", size: 100) == .whole)
        #expect(ByteRangeRequest.of("bytes=5-1", size: 100) == .whole)
        #expect(ByteRangeRequest.of("items=0-1", size: 100) == .whole)
        #expect(ByteRangeRequest.of("bytes=99999999999999999999-", size: 100) == .whole)
    }

    @Test("If-None-Match compares weakly, * matches; If-Range needs the strong tag or the exact date")
    func entityTags() {
        #expect(EntityTagList.weaklyMatches("\"a\", W/\"b\"", tag: "\"b\""))
        #expect(EntityTagList.weaklyMatches("*", tag: "\"b\""))
        #expect(!EntityTagList.weaklyMatches("\"c\"", tag: "\"b\""))
        #expect(EntityTagList.rangeValidatorHolds("\"b\"", tag: "\"b\"", lastModified: "x"))
        #expect(!EntityTagList.rangeValidatorHolds("W/\"b\"", tag: "\"b\"", lastModified: "x"))
        #expect(EntityTagList.rangeValidatorHolds("Sun, 06 Dec 2026 10:00:00 GMT", tag: "\"b\"", lastModified: "Sun, 06 Dec 2026 10:00:00 GMT"))
    }

    @Test("the browser rule: Origin and cross-site fetches refused; over TCP the Host must be this machine")
    func browserRule() {
        func head(_ headers: [(String, String)]) -> HTTPRequestHead {
            HTTPRequestHead(version: .http1_1, method: .GET, uri: "/metrics", headers: HTTPHeaders(headers))
        }
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Host", "127.0.0.1:8090")]), overTCP: true) == nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Host", "localhost")]), overTCP: true) == nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Host", "[::1]:8090")]), overTCP: true) == nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Host", "evil.example")]), overTCP: true) != nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Host", "127.0.0.1.evil.example")]), overTCP: true) != nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([]), overTCP: true) != nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([]), overTCP: false) == nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Origin", "null")]), overTCP: false) != nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Sec-Fetch-Site", "same-site")]), overTCP: false) != nil)
        #expect(HTTPFaceBrowserRule.refusal(of: head([("Sec-Fetch-Site", "none")]), overTCP: false) == nil)
    }

    @Test("http-listen: unix paths and literal loopback addresses; names refused; loopback decided by address")
    func listenAddresses() throws {
        #expect(try HTTPListenAddress(parsing: "unix:/run/imgd/http.sock") == .path("/run/imgd/http.sock"))
        #expect(try HTTPListenAddress(parsing: "127.0.0.1:8090") == .tcp(host: "127.0.0.1", port: 8090))
        #expect(try HTTPListenAddress(parsing: "[::1]:8090") == .tcp(host: "::1", port: 8090))
        #expect(throws: HTTPListenAddressError.self) { try HTTPListenAddress(parsing: "localhost:8090") }
        #expect(throws: HTTPListenAddressError.self) { try HTTPListenAddress(parsing: "127.0.0.1:0") }
        #expect(throws: HTTPListenAddressError.self) { try HTTPListenAddress(parsing: "127.0.0.1") }
        #expect(throws: HTTPListenAddressError.self) { try HTTPListenAddress(parsing: "unix:") }
        #expect(HTTPListenAddress.isLoopback(host: "127.8.9.1"))
        #expect(HTTPListenAddress.isLoopback(host: "::1"))
        #expect(HTTPListenAddress.isLoopback(host: "::ffff:127.0.0.1"))
        #expect(!HTTPListenAddress.isLoopback(host: "0.0.0.0"))
        #expect(!HTTPListenAddress.isLoopback(host: "::"))
        #expect(!HTTPListenAddress.isLoopback(host: "10.0.0.1"))
    }

    @Test("errors map to statuses in one place: origin failures 502, timeouts 504, queue and shutdown 503 with Retry-After")
    func statuses() {
        #expect(HTTPFaceError(.other(code: "http_404", message: "")).status == .badGateway)
        #expect(HTTPFaceError(.other(code: "timeout", message: "")).status == .gatewayTimeout)
        #expect(HTTPFaceError(.other(code: "policy_denied", message: "")).status == .forbidden)
        #expect(HTTPFaceError(.other(code: "too_large", message: "")).status == .payloadTooLarge)
        #expect(HTTPFaceError(.other(code: "disk_full", message: "")).status == .insufficientStorage)
        #expect(HTTPFaceError(.queueFull(requests: 1, bytes: 1)).status == .serviceUnavailable)
        #expect(HTTPFaceError(.queueFull(requests: 1, bytes: 1)).retryAfter == 1)
        #expect(HTTPFaceError(.notFound("x")).status == .notFound)
        #expect(HTTPFaceError(.invalidArgument(field: "url", reason: "x")).status == .badRequest)
    }
}

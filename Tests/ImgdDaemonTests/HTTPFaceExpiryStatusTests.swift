import ImgdCore
import NIOHTTP1
@testable import ImgdDaemon
import Testing

/// The HTTP face's status for an expired signed URL (Protocol.md, *HTTP face*, *Errors*).
@Suite("HTTP face: url_expired")
struct HTTPFaceExpiryStatusTests {
    @Test("url_expired is 410 Gone: the URL as given is no longer valid, asking again will not help, a re-signed one will")
    func gone() {
        #expect(HTTPFaceError.status(ofFailure: FailureCode.urlExpired.rawValue) == .gone)
        let error = HTTPFaceError(ControlError.other(code: "url_expired", message: "the URL's signature is valid only until …"))
        #expect(error.status == .gone)
        #expect(error.code == "url_expired")
        #expect(error.retryAfter == nil)
    }
}

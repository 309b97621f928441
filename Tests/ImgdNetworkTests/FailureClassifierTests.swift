import CCurlShim
import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// The mapping from libcurl's result codes to failure classes, where the class depends on what
/// the transfer saw before the error.
@Suite("Failure classes from libcurl's results", .offThePool)
struct FailureClassifierTests {
    @Test(
        "a broken connection is truncated once a 2xx status or any body byte arrived, network before",
        arguments: [CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_SEND_ERROR])
    func brokenConnection(code: CURLcode) {
        func classify(bytes: Int, status: Int) -> String {
            FailureClassifier.classify(code, detail: "cut", bytesReceived: bytes, responseStatus: status, maxRedirects: 5).code
        }
        #expect(classify(bytes: 0, status: 0) == "network", "no response at all")
        // A stream reset right behind its first DATA frame: the status arrived, the bytes did not.
        #expect(classify(bytes: 0, status: 200) == "truncated")
        #expect(classify(bytes: 500, status: 200) == "truncated")
        #expect(classify(bytes: 500, status: 0) == "truncated")
        // A 404's body is not an image being cut: that failure is the connection's.
        #expect(classify(bytes: 0, status: 404) == "network")
    }

    @Test("a partial file is truncated whatever arrived")
    func partialFile() {
        #expect(FailureClassifier.classify(CURLE_PARTIAL_FILE, detail: "", bytesReceived: 0, maxRedirects: 5).code == "truncated")
    }
}

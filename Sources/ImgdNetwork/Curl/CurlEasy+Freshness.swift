import CCurlShim
import ImgdCore

extension CurlEasy {
    /// What the final response's headers say about its lifetime, read as it arrived at
    /// `receivedAt` (milliseconds since 1970).
    func responseFreshness(receivedAt: Int) -> ResponseFreshness {
        ResponseFreshness(
            cacheControl: header("Cache-Control"), expires: header("Expires"), date: header("Date"), age: header("Age"),
            receivedAt: receivedAt)
    }
}

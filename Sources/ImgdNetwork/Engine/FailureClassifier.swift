import CCurlShim

/// Maps libcurl's result codes to imgd's failure classes. The one place that reads a `CURLcode`.
enum FailureClassifier {
    /// The class of a transfer that libcurl ended with `code` (not `CURLE_OK`), given what the
    /// transfer itself saw (`bytesReceived`, and `responseStatus`, the last response's status
    /// or 0 when none arrived) and libcurl's detailed message.
    static func classify(
        _ code: CURLcode, detail: String, bytesReceived: Int, responseStatus: Int = 0, maxRedirects: Int
    ) -> DownloadError {
        let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .dns(reason)
        case CURLE_COULDNT_CONNECT:
            return .connect(reason)
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout(reason)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE,
            CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
            CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            return .tls(reason)
        case CURLE_PARTIAL_FILE:
            return .truncated("the connection closed before the whole body arrived (\(bytesReceived) bytes received): \(reason)")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM,
            CURLE_WEIRD_SERVER_REPLY:
            // Once a 2xx status has arrived the body was under way, even if none of it reached
            // the transfer: over HTTP/2 a stream reset right behind its first DATA frame can end
            // the stream before libcurl hands those bytes on, so the count alone would call the
            // same cut `truncated` or `network` by timing.
            return bytesReceived > 0 || (200..<300).contains(responseStatus)
                ? .truncated("the connection broke after \(bytesReceived) bytes of the body: \(reason)")
                : .network(reason)
        case CURLE_FILESIZE_EXCEEDED:
            return .tooLarge("the declared body size is over the limit: \(reason)")
        case CURLE_TOO_MANY_REDIRECTS:
            return .tooManyRedirects(limit: maxRedirects)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return .policyDenied("only http and https are allowed (a redirect to another scheme?): \(reason)")
        case CURLE_ABORTED_BY_CALLBACK:
            return .cancelled
        default:
            return .network("libcurl error \(code.rawValue): \(reason)")
        }
    }
}

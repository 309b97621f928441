import NIOHTTP1

/// Refuses what a web browser sends on a page's behalf. A page the user opens can make the
/// browser send a `GET` to `127.0.0.1:8090` (an image tag needs no permission), which would make
/// imgd fetch a URL of the page's choosing (an internal one) and fill the cache; a page on a
/// rebound DNS name can even read the answer. Resizers, proxies, curl and scripts send none of
/// the headers that mark such a request, so they are not affected.
enum HTTPFaceBrowserRule {
    /// `policy_denied` for a request with `Origin`, with `Sec-Fetch-Site` other than `none` or
    /// `same-origin`, or, over TCP, with a `Host` that is not a loopback address or `localhost`.
    static func refusal(of head: HTTPRequestHead, overTCP: Bool) -> HTTPFaceError? {
        if head.headers.contains(name: "Origin") {
            return .crossSite("a cross-site browser request (Origin: …) is refused: imgd fetches for programs on this machine, not for web pages")
        }
        if let site = head.headers.first(name: "Sec-Fetch-Site"), site != "none", site != "same-origin" {
            return .crossSite("a cross-site browser request (Sec-Fetch-Site: \(HTTPFaceRoute.quoted(site))) is refused")
        }
        guard overTCP else { return nil }
        guard let host = head.headers.first(name: "Host"), isLocal(host: host) else {
            return .crossSite("the Host header must name this machine (127.0.0.1, [::1] or localhost) on the TCP face: a DNS name that points here is refused")
        }
        return nil
    }

    /// Whether a `Host` value names a loopback address or `localhost`, with or without a port.
    static func isLocal(host value: String) -> Bool {
        // What nearly every local client sends, recognised without parsing.
        if value == "127.0.0.1" || value == "localhost" || value.hasPrefix("127.0.0.1:") && value.utf8.dropFirst(10).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return true
        }
        var host = Substring(value.trimmingSpaces)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return false }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            guard host[host.index(after: colon)...].allSatisfy(\.isNumber) else { return false }
            host = host[..<colon]
        }
        return host.lowercased() == "localhost" || HTTPListenAddress.isLoopback(host: String(host))
    }
}

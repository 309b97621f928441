extension AddressPolicy {
    /// Why an address is refused: the denied range it fell in, and how.
    public struct Refusal: Sendable, Equatable, CustomStringConvertible {
        /// How the address was matched.
        public enum Match: Sendable, Equatable {
            /// The address itself is in the range.
            case inRange
            /// The IPv6 address carries this IPv4 address (``IPRange/Address/embeddedIPv4``), which
            /// is in the range.
            case embeds(IPRange.Address)
            /// The address is `0.0.0.0` or `::` (this host), and the range holds one of this host's
            /// addresses (`0.0.0.0`, `::`, `127.0.0.1`, `::1`).
            case meansThisHost
        }

        /// The address as given, before normalisation.
        public let address: IPRange.Address
        /// The denied range that refuses it.
        public let range: IPRange
        public let match: Match

        /// The reason, to follow "… is refused: ".
        public var description: String {
            switch match {
            case .inRange: "it is in the denied range \(range)"
            case .embeds(let ipv4): "it stands for the IPv4 address \(ipv4), in the denied range \(range)"
            case .meansThisHost: "it means this host, and the denied range \(range) holds this host's address"
            }
        }
    }

    /// What "this host" is reached by: the unspecified and loopback addresses of both families.
    /// Denying any of them denies the unspecified ones too, since connecting to `0.0.0.0` or `::`
    /// reaches loopback.
    private static let thisHost = ["0.0.0.0", "::", "127.0.0.1", "::1"].map { IPRange.Address($0)! }

    /// Why connecting to `address` is refused, or nil when it is allowed. Besides the address
    /// itself, the IPv4 address an IPv6 form carries is checked (IPv4-compatible, NAT64, 6to4;
    /// IPv4-mapped is IPv4 already), and `0.0.0.0` and `::` count as this host's loopback.
    public func refusal(of address: IPRange.Address) -> Refusal? {
        if let range = deniedRanges.first(where: { $0.contains(address) }) {
            return Refusal(address: address, range: range, match: .inRange)
        }
        let embedded = address.embeddedIPv4
        if let embedded, let range = deniedRanges.first(where: { $0.contains(embedded) }) {
            return Refusal(address: address, range: range, match: .embeds(embedded))
        }
        if (embedded ?? address).isUnspecified {
            for local in Self.thisHost {
                if let range = deniedRanges.first(where: { $0.contains(local) }) {
                    return Refusal(address: address, range: range, match: .meansThisHost)
                }
            }
        }
        return nil
    }

    /// Why a URL whose host is `host` (as libcurl's URL API gives it, IPv6 in brackets) is
    /// refused; nil when the host is an allowed address or a name. A name is resolved by the
    /// proxy when there is one, so only a literal address can be checked before the request.
    public func refusal(ofHost host: String) -> Refusal? {
        IPRange.Address(urlHost: host).flatMap(refusal(of:))
    }
}

extension AddressPolicy {
    /// The `policy_denied` reason for a request to `url`, whose host libcurl reads as `host`; nil
    /// when it may be sent. `isRedirect` says whether `url` is a redirect target or the URL given.
    func requestRefusal(url: String, host: String, isRedirect: Bool) -> String? {
        guard let refusal = refusal(ofHost: host) else { return nil }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let shown = bare == refusal.address.description ? host : "\(host) (\(refusal.address))"
        return isRedirect
            ? "the redirect to \(url) is refused (host \(shown)): \(refusal)"
            : "the URL's host \(shown) is refused: \(refusal)"
    }
}

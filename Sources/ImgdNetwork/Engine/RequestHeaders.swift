/// The extra headers one request sends, built in one place: ``Transfer/configure(_:)`` hands
/// them to libcurl (``CurlHeaderList``) and nothing else adds any: the target host's table's
/// `headers`, then a revalidation's validators (`If-None-Match`, `If-Modified-Since`).
///
/// A value holding CR or LF is dropped, never sent: it would end the header early and let the
/// rest of the text (an ETag stored from a hostile response) inject headers of its own.
struct RequestHeaders: Sendable, Equatable {
    /// `Name: value` lines, in the order they were added.
    private(set) var lines: [String] = []

    init() {}

    /// The target host's header lines (`Name: value`, checked when the configuration was read),
    /// then the conditional headers of a revalidation of an entry stored with `validators`.
    init(host: [String] = [], validators: Validators?) {
        lines = host
        if let etag = validators?.etag { add("If-None-Match", etag) }
        if let lastModified = validators?.lastModified { add("If-Modified-Since", lastModified) }
    }

    /// Adds `name: value`; a value with a line break (or a NUL), or an empty or over-long one, is
    /// left out.
    mutating func add(_ name: String, _ value: String) {
        guard !value.isEmpty, value.utf8.count <= Self.maximumValueBytes,
            !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
        else { return }
        lines.append("\(name): \(value)")
    }

    var isEmpty: Bool { lines.isEmpty }

    /// The longest header value sent: 8 KiB.
    static let maximumValueBytes = 8192
}

/// What imgd kept of a cached entry's response to ask its origin whether it changed: the
/// entry's `ETag` and `Last-Modified`.
struct Validators: Sendable, Equatable {
    let etag: String?
    let lastModified: String?
}

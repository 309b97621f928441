import ImgdCore
import ImgdStore
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// Builds an image's response from a request's conditionals and range (RFC 9110): 200, 206,
/// 304 or 416, with the headers a resizer or a cache in front needs. The one place a served
/// image becomes HTTP, and the one place a cache file becomes an `NIOFileHandle`.
enum HTTPFaceResponder {
    /// A year: what `Cache-Control` says of an entry imgd never revalidates (`refresh = off`).
    static let unboundedMaxAge = 31_536_000

    /// The response to `head` for `image`. Takes the file descriptor of a file body: it goes
    /// into the response, or is closed here when the response has no body.
    static func response(for image: ServedImage, head: HTTPRequestHead, now: Int) -> HTTPFaceResponse {
        let entry = image.entry
        let tag = "\"\(entry.sha256.hex)\""
        let lastModified = lastModifiedText(entry)
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: tag)
        headers.add(name: "Last-Modified", value: lastModified)
        headers.add(name: "Cache-Control", value: cacheControl(for: image, now: now))
        headers.add(name: "X-Imgd-Source", value: image.source.rawValue)
        if notModified(head.headers, tag: tag, lastModified: lastModified) {
            release(image)
            return HTTPFaceResponse(status: .notModified, headers: headers, body: .none)
        }
        headers.add(name: "Content-Type", value: entry.format.mediaType)
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        if entry.format == .svg {
            // An SVG may carry script: opened from imgd's origin, it must not run.
            headers.add(name: "Content-Security-Policy", value: "default-src 'none'; style-src 'unsafe-inline'; sandbox")
        }
        var range = ByteRangeRequest.of(head.headers.first(name: "Range"), size: entry.bytes)
        if let validator = head.headers.first(name: "If-Range"),
            !EntityTagList.rangeValidatorHolds(validator, tag: tag, lastModified: lastModified)
        {
            range = .whole
        }
        let status: HTTPResponseStatus
        let bytes: Range<Int>
        switch range {
        case .whole:
            status = .ok
            bytes = 0..<entry.bytes
        case .partial(let part):
            status = .partialContent
            bytes = part
            headers.add(name: "Content-Range", value: "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(entry.bytes)")
        case .unsatisfiable:
            release(image)
            var response = HTTPFaceResponse.error(.rangeNotSatisfiable(size: entry.bytes))
            response.headers.add(name: "Content-Range", value: "bytes */\(entry.bytes)")
            return response
        }
        headers.add(name: "Content-Length", value: "\(bytes.count)")
        guard head.method != .HEAD, !bytes.isEmpty else {
            release(image)
            return HTTPFaceResponse(status: status, headers: headers, body: .none)
        }
        switch image.body {
        case .memory(let all):
            return HTTPFaceResponse(status: status, headers: headers, body: .bytes(ByteBuffer(bytes: all[bytes])))
        case .file(let file):
            // The descriptor is the handle's from here on: closed when the write completes.
            let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: file.descriptor)
            return HTTPFaceResponse(status: status, headers: headers, body: .file(handle, bytes))
        }
    }

    /// `Last-Modified`: the origin's, sent on as it is when it has an IMF-fixdate's shape (no
    /// date is parsed for a hit), else read and written anew; when the origin gave none (or one
    /// imgd cannot read), when imgd fetched it.
    static func lastModifiedText(_ entry: IndexEntry) -> String {
        if let given = entry.lastModified {
            if HTTPDate.looksLikeIMFFixdate(given) { return given }
            if let instant = HTTPDate.milliseconds(given) { return HTTPDate.format(milliseconds: instant) }
        }
        return HTTPDate.format(milliseconds: entry.fetchedAt)
    }

    /// What a cache downstream may do with the image: keep it as long as imgd would before it
    /// revalidates, so it never trusts an entry longer than imgd does (and revalidates cheaply
    /// with `If-None-Match`).
    static func cacheControl(for image: ServedImage, now: Int) -> String {
        guard let dueAt = image.entry.freshness.dueAt(under: image.refresh, minFresh: image.minFresh) else {
            return image.entry.freshness.immutable ? "max-age=\(unboundedMaxAge), immutable" : "max-age=\(unboundedMaxAge)"
        }
        if dueAt == Int.min { return "no-cache" }
        return "max-age=\(max(0, dueAt - now) / 1000)"
    }

    /// `If-None-Match` (weak comparison) decides when present; else `If-Modified-Since`.
    static func notModified(_ headers: HTTPHeaders, tag: String, lastModified: String) -> Bool {
        let tags = headers["If-None-Match"]
        if !tags.isEmpty { return tags.contains { EntityTagList.weaklyMatches($0, tag: tag) } }
        guard let since = headers.first(name: "If-Modified-Since").flatMap(HTTPDate.milliseconds),
            let modified = HTTPDate.milliseconds(lastModified)
        else { return false }
        return modified <= since
    }

    /// Closes a file body that will not be sent.
    static func release(_ image: ServedImage) {
        if case .file(let file) = image.body { Glibc.close(file.descriptor) }
    }
}

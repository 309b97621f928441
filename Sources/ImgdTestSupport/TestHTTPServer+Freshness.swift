import Foundation

extension TestHTTPServer {
    /// What a request said to make itself conditional: its `If-None-Match` and
    /// `If-Modified-Since`, as sent.
    struct Conditional: Sendable, Equatable {
        var ifNoneMatch: String?
        var ifModifiedSince: String?

        static let none = Conditional()

        var isConditional: Bool { ifNoneMatch != nil || ifModifiedSince != nil }

        /// Read from a request head's header fields.
        init(headers: [(name: String, value: String)]) {
            for header in headers {
                switch header.name.lowercased() {
                case "if-none-match": ifNoneMatch = header.value
                case "if-modified-since": ifModifiedSince = header.value
                default: break
                }
            }
        }

        init() {}
    }

    /// `/fresh/NAME.EXT?cc=…&expires=±S&age=S&changes_at=N&validators=etag|lm|both&cond_status=S`:
    /// an image served with freshness headers that answers conditional requests.
    ///
    /// - `cc`: the `Cache-Control` value; `expires`: `Expires` that many seconds from now
    ///   (negative: in the past), or `bad` for an unparseable one; `age`: an `Age` header. Every
    ///   response carries `Date: now`.
    /// - `changes_at=N`: from the N-th request for the exact target on, the image is another
    ///   (one pixel wider, another seed, ETag `"v2"`, a later `Last-Modified`); before, ETag `"v1"`.
    /// - A request whose `If-None-Match` names the current ETag (or, without one, whose
    ///   `If-Modified-Since` is the current `Last-Modified`) is answered `304` with the same
    ///   freshness headers and no body; `cond_status=S` answers conditional requests `S` instead.
    /// - `validators`: which validators the responses carry (both by default).
    struct FreshResource: Sendable, Equatable {
        var image: Route.Image
        var cacheControl: String?
        var expiresIn: String?
        var age: Int?
        var changesAt: Int?
        var validators: String
        var conditionalStatus: Int?

        init(image: Route.Image, target: Target) throws(Target.Invalid) {
            self.image = image
            cacheControl = try target.headerValue("cc")
            expiresIn = try target.headerValue("expires")
            age = try target.integer("age", in: 0...1_000_000_000)
            changesAt = try target.integer("changes_at", in: 1...1_000_000)
            validators = try target.headerValue("validators") ?? "both"
            guard ["etag", "lm", "both"].contains(validators) else { throw Target.Invalid(name: "validators", value: validators) }
            conditionalStatus = try target.integer("cond_status", in: 200...599)
        }

        /// The `Last-Modified` of the changed image.
        static let changedLastModified = "Thu, 22 Oct 2015 07:28:00 GMT"

        func response(attempt: Int, conditional: Conditional) -> Response {
            let changed = changesAt.map { attempt >= $0 } ?? false
            var image = image
            if changed {
                // Another image for sure: one pixel wider (PNG pixels use `seed | 1`, so seed + 1
                // alone may draw the same).
                image.width += 1
                image.seed &+= 2
            }
            let etag = changed ? "\"v2\"" : "\"v1\""
            let lastModified = changed ? Self.changedLastModified : TestHTTPServer.imageLastModified
            let now = Date()
            var headers: [(name: String, value: String)] = [("Date", Self.httpDate(now))]
            if validators != "lm" { headers.append(("ETag", etag)) }
            if validators != "etag" { headers.append(("Last-Modified", lastModified)) }
            if let cacheControl { headers.append(("Cache-Control", cacheControl)) }
            if let expiresIn {
                let seconds = Double(expiresIn)
                headers.append(("Expires", seconds.map { Self.httpDate(now.addingTimeInterval($0)) } ?? expiresIn))
            }
            if let age { headers.append(("Age", "\(age)")) }
            if conditional.isConditional {
                if let conditionalStatus { return Response.page(status: conditionalStatus) }
                let matches = conditional.ifNoneMatch.map { $0 == etag } ?? (conditional.ifModifiedSince == lastModified)
                if matches { return Response(status: 304, headers: headers, body: []) }
            }
            return Response(status: 200, headers: [("Content-Type", image.contentType)] + headers, body: image.body)
        }

        static func httpDate(_ date: Date) -> String {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            return formatter.string(from: date)
        }
    }
}

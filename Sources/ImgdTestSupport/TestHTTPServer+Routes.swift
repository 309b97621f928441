extension TestHTTPServer {
    /// What a request-target asks for: the resource, separate from how it is delivered (``Behaviour``).
    enum Route: Sendable, Equatable {
        /// `/img/NAME.png|gif|jpg`.
        case image(Image)
        /// `/flaky/NAME.EXT?fail=N&status=S&retry_after=R`: N failures per exact target, then the image.
        case flaky(Image, failures: Int, status: Int, retryAfter: String?)
        /// `/gzip-labelled/NAME.EXT`: the image, sent as is but labelled `Content-Encoding: gzip`,
        /// to show a client that does not ask for encodings does not try to inflate.
        case gzipLabelled(Image)
        /// `/fresh/NAME.EXT?cc=…`: the image with freshness headers, answering conditional
        /// requests (``FreshResource``).
        case fresh(FreshResource)
        /// `/private/NAME.EXT?key=SECRET`: the image to a request whose `X-Api-Key` is `SECRET`,
        /// `403` to any other (an origin that serves only with a per-host header).
        case privateImage(Image, key: String)
        /// `/html`: a 200 HTML page where an image was expected.
        case html
        /// `/status/CODE`.
        case status(Int)
        /// `/huge.png`: a PNG declaring 100000×100000 pixels.
        case huge
        /// `/corrupt.png`: an 8×8 PNG with a bit flipped in its image data (its IDAT fails its CRC).
        case corrupt
        /// `/redirect?to=URL`: 302 to the decoded URL.
        case redirect(to: String)
        /// `/loop/N`: 302 to `/loop/N+1`, forever.
        case loop(Int)
        /// Anything else: 404.
        case notFound

        /// A generated image and its parameters; the body depends on nothing else, so it is
        /// deterministic for a target.
        struct Image: Sendable, Equatable {
            enum Format: String, Sendable { case png, gif, jpeg }
            var format: Format
            var width: Int
            var height: Int
            /// `bytes=N`: aim for about N bytes (PNG padding, JPEG scan length); GIFs ignore it.
            var bytes: Int?
            /// `seed=S` (PNG pixels), by default derived from the name.
            var seed: UInt32
            /// `flip=N`: one bit of byte N flipped after the image was made (damage a CRC catches
            /// in a PNG); ignored past the end.
            var flip: Int?

            /// The largest dimension accepted, and the largest pixel count (about 12 MB of PNG).
            static let maximumSide = 16_384
            static let maximumPixels = 4 << 20
            /// The largest `bytes` accepted.
            static let maximumBytes = 64 << 20

            init(name: Substring, target: Target) throws(Target.Invalid) {
                guard let dot = name.lastIndex(of: "."), dot != name.startIndex,
                    let format = Self.format(extension: name[name.index(after: dot)...])
                else { throw Target.Invalid(name: "path", value: String(name)) }
                self.format = format
                width = try target.integer("w", default: 8, in: 1...Self.maximumSide) ?? 8
                height = try target.integer("h", default: 8, in: 1...Self.maximumSide) ?? 8
                guard width * height <= Self.maximumPixels else {
                    throw Target.Invalid(name: "w*h", value: "\(width * height)")
                }
                bytes = try target.integer("bytes", in: 0...Self.maximumBytes)
                let derived = Int(Self.fnv1a(name[..<dot]))
                seed = UInt32(try target.integer("seed", default: derived, in: 0...Int(UInt32.max)) ?? derived)
                flip = try target.integer("flip", in: 0...Self.maximumBytes)
            }

            private static func format(extension ext: Substring) -> Format? {
                switch ext.lowercased() {
                case "png": .png
                case "gif": .gif
                case "jpg", "jpeg": .jpeg
                default: nil
                }
            }

            /// FNV-1a, not `Hasher`: `Hasher` is seeded per process, and bodies must be the same in
            /// every process (a test may compare against bytes computed by another).
            static func fnv1a(_ text: Substring) -> UInt32 {
                var hash: UInt32 = 0x811C_9DC5
                for byte in text.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
                return hash
            }

            var contentType: String { "image/\(format.rawValue)" }

            var body: [UInt8] {
                var body = undamagedBody
                if let flip, flip < body.count { body[flip] ^= 0x10 }
                return body
            }

            private var undamagedBody: [UInt8] {
                switch format {
                case .png:
                    if let bytes {
                        return TestImages.png(bytes: bytes, width: width, height: height, seed: seed)
                    }
                    return TestImages.png(width: width, height: height, seed: seed)
                case .gif:
                    return TestImages.gif(width: width, height: height)
                case .jpeg:
                    guard let bytes else { return TestImages.jpeg(width: width, height: height) }
                    let overhead = TestImages.jpeg(width: width, height: height, scanBytes: 0).count
                    return TestImages.jpeg(width: width, height: height, scanBytes: max(0, bytes - overhead))
                }
            }
        }

        /// The most failures `/flaky` accepts.
        static let maximumFailures = 1_000_000

        init(_ target: Target) throws(Target.Invalid) {
            let path = target.path
            if let name = Self.suffix(of: path, after: "/img/") {
                self = .image(try Image(name: name, target: target))
            } else if let name = Self.suffix(of: path, after: "/flaky/") {
                self = .flaky(
                    try Image(name: name, target: target),
                    failures: try target.integer("fail", default: 1, in: 0...Self.maximumFailures) ?? 1,
                    status: try target.integer("status", default: 503, in: 200...599) ?? 503,
                    retryAfter: try target.headerValue("retry_after"))
            } else if let name = Self.suffix(of: path, after: "/gzip-labelled/") {
                self = .gzipLabelled(try Image(name: name, target: target))
            } else if let name = Self.suffix(of: path, after: "/fresh/") {
                self = .fresh(try FreshResource(image: try Image(name: name, target: target), target: target))
            } else if let name = Self.suffix(of: path, after: "/private/") {
                guard let key = try target.headerValue("key"), !key.isEmpty else {
                    throw Target.Invalid(name: "key", value: target.query["key"] ?? "")
                }
                self = .privateImage(try Image(name: name, target: target), key: key)
            } else if path == "/html" {
                self = .html
            } else if let code = Self.suffix(of: path, after: "/status/") {
                // Three digits, 200–999: a 1xx is not a final response, and the client would wait forever.
                guard let status = Int(code), (200...999).contains(status) else {
                    throw Target.Invalid(name: "path", value: path)
                }
                self = .status(status)
            } else if path == "/huge.png" {
                self = .huge
            } else if path == "/corrupt.png" {
                self = .corrupt
            } else if path == "/redirect" {
                guard let location = try target.headerValue("to"), !location.isEmpty else {
                    throw Target.Invalid(name: "to", value: target.query["to"] ?? "")
                }
                self = .redirect(to: location)
            } else if let step = Self.suffix(of: path, after: "/loop/") {
                guard let number = Int(step), number >= 0, number < Int.max else {
                    throw Target.Invalid(name: "path", value: path)
                }
                self = .loop(number)
            } else {
                self = .notFound
            }
        }

        private static func suffix(of path: String, after prefix: String) -> Substring? {
            guard path.hasPrefix(prefix), path.count > prefix.count else { return nil }
            return path.dropFirst(prefix.count)
        }

        /// The response to the `attempt`-th request (1-based) for this exact target; only `/flaky`
        /// looks at `attempt`, only `/private` at `apiKey` (the request's `X-Api-Key`).
        func response(attempt: Int, conditional: Conditional = .none, apiKey: String? = nil) -> Response {
            switch self {
            case .fresh(let resource):
                return resource.response(attempt: attempt, conditional: conditional)
            case .image(let image):
                return Response(
                    status: 200,
                    headers: [
                        ("Content-Type", image.contentType),
                        ("ETag", "\"\(image.body.count)-\(image.body.last ?? 0)\""),
                        ("Last-Modified", TestHTTPServer.imageLastModified),
                    ],
                    body: image.body)
            case .gzipLabelled(let image):
                var response = Route.image(image).response(attempt: attempt)
                response.headers.append(("Content-Encoding", "gzip"))
                return response
            case .flaky(let image, let failures, let status, let retryAfter):
                guard attempt > failures else {
                    var failure = Response.page(status: status)
                    if let retryAfter { failure.headers.append(("Retry-After", retryAfter)) }
                    return failure
                }
                return Route.image(image).response(attempt: attempt)
            case .privateImage(let image, let key):
                guard apiKey == key else { return Response.page(status: 403) }
                return Route.image(image).response(attempt: attempt)
            case .html:
                return Response(status: 200, headers: [("Content-Type", "text/html")], body: TestImages.htmlPage)
            case .status(let status):
                var response = Response.page(status: status)
                if response.forbidsBody { response.body = [] }
                return response
            case .huge:
                return Response(
                    status: 200, headers: [("Content-Type", "image/png")],
                    body: TestImages.pngHeaderOnly(width: 100_000, height: 100_000))
            case .corrupt:
                return Response(
                    status: 200, headers: [("Content-Type", "image/png")],
                    body: TestImages.pngWithFlippedBit(width: 8, height: 8))
            case .redirect(let location):
                return Response.page(status: 302, headers: [("Location", location)])
            case .loop(let number):
                return Response.page(status: 302, headers: [("Location", "/loop/\(number + 1)")])
            case .notFound:
                return Response.page(status: 404)
            }
        }
    }

    /// The body a successful request for `pathAndQuery` receives (for `/flaky`, the image after the
    /// failures), or nil when the server would answer 404 or 400. Modifier parameters (`delay_ms`,
    /// `gate`, `cl`, …) change delivery, never these bytes.
    /// The `Last-Modified` every generated image is served with.
    public static let imageLastModified = "Wed, 21 Oct 2015 07:28:00 GMT"

    public static func body(for pathAndQuery: String) -> [UInt8]? {
        guard let route = try? Route(Target(pathAndQuery)), route != .notFound,
            (try? Behaviour(Target(pathAndQuery))) != nil
        else { return nil }
        if case .privateImage(_, let key) = route { return route.response(attempt: Int.max, apiKey: key).body }
        return route.response(attempt: Int.max).body
    }
}

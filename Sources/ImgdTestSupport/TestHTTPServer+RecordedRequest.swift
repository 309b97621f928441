extension TestHTTPServer {
    /// One request as the server received it: its target and the header fields of its head, in
    /// order, names as sent (HTTP/2 sends them in lower case).
    public struct RecordedRequest: Sendable, Equatable {
        public var target: String
        public var headers: [Header]
        /// When its head arrived, taken on the server's event loop (a test timing requests does
        /// not depend on when its own task polls).
        public var arrivedAt: ContinuousClock.Instant

        /// One header field.
        public struct Header: Sendable, Equatable {
            public var name: String
            public var value: String
        }

        /// The values of every field named `name`, compared without case.
        public func values(of name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }
    }
}

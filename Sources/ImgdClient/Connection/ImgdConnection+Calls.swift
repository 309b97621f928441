import ImgdProtocol

/// Typed calls over ``ImgdConnection/request(_:_:)``: an error reply is thrown as
/// ``ImgdClientError/daemon(code:message:)``.
extension ImgdConnection {
    /// `hello`: the daemon's `features` (`subscribe`, `pin`, `data`, `fd`, …).
    public func features() throws(ImgdClientError) -> Set<String> {
        let result = try succeeded(request("hello")).result
        return Set(result["features"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    /// `get`: the image at `url`, downloaded first when it is not cached (unless `options` says
    /// not to). With ``GetOptions/descriptor`` the reply's descriptor comes in
    /// ``CachedImageInfo/file``; a daemon without the `fd` feature passes none (check
    /// ``features()`` first to tell).
    public func get(_ url: String, options: GetOptions = GetOptions()) throws(ImgdClientError) -> CachedImageInfo {
        let lost = lostDescriptors
        let reply = try succeeded(request("get", options.arguments(url: url)))
        if options.descriptor, reply.descriptor == nil, lostDescriptors != lost {
            throw .descriptorLost(socket: socketPath)
        }
        return try CachedImageInfo(result: reply.result, file: options.descriptor ? reply.descriptor : nil)
    }

    /// `add`: queues `urls` for download; returns how many were accepted and the rejected ones
    /// (`{"url", "code", "message"}` each).
    public func add(_ urls: [String], priority: String? = nil) throws(ImgdClientError) -> (accepted: Int, rejected: [JSONValue]) {
        var arguments: [String: JSONValue] = ["urls": .array(urls.map { .string($0) })]
        if let priority { arguments["priority"] = .string(priority) }
        let result = try succeeded(request("add", arguments)).result
        return (result["accepted"]?.intValue ?? 0, result["rejected"]?.arrayValue ?? [])
    }

    /// `status`: the daemon's state, as Protocol.md describes it.
    public func status() throws(ImgdClientError) -> JSONValue {
        try succeeded(request("status")).result
    }

    /// `subscribe`: from now on the daemon sends the named events (all when nil); read them
    /// with ``nextEvent(timeout:)``. Returns the names subscribed to.
    @discardableResult
    public func subscribe(_ events: [String]? = nil) throws(ImgdClientError) -> [String] {
        var arguments: [String: JSONValue] = [:]
        if let events { arguments["events"] = .array(events.map { .string($0) }) }
        let result = try succeeded(request("subscribe", arguments)).result
        return result["subscribed"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// `reply`, or its error thrown.
    func succeeded(_ reply: ImgdReply) throws(ImgdClientError) -> ImgdReply {
        if let error = reply.error { throw .daemon(code: error.code, message: error.message) }
        return reply
    }
}

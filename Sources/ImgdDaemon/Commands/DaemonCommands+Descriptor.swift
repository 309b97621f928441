import ImgdCore
import ImgdProtocol
import ImgdStore

extension DaemonCommands {
    /// `get` with `"fd": true`: the image as `get` answers it (fetched first when needed), then its
    /// file opened through ``DiskCache/openVerified(_:)`` and the reply made from the row found
    /// with it, so the reply's `sha256` and `bytes` describe exactly what the descriptor reads,
    /// whatever an eviction, a purge or a refresh does to the name afterwards.
    ///
    /// An entry evicted between the answer and the open is fetched once more; a body being
    /// published (its rename may be ahead of its row) is asked for again once the publisher has
    /// committed what it holds (``Downloader/settlePublishing()``).
    ///
    /// `data` is ignored (the descriptor reads the bytes, whatever their size): a client asks for
    /// both to get a descriptor from this daemon and the bytes from one without the feature, in
    /// one request.
    func getPassingDescriptor() async throws(ControlError) -> (JSONValue, PassedDescriptor) {
        if try !request.bool("wait", default: true) {
            throw .invalidArgument(field: "fd", reason: "cannot be used with \"wait\": false, which answers before there is a file")
        }
        _ = try request.bool("data", default: false)  // still a boolean
        let arguments = GetArguments(image: try imageRequest(), data: false)
        request.prepared.keep(arguments)
        let image = arguments.image
        for _ in 0..<2 {
            let answer = try await get()
            let source = answer["source"]?.stringValue.flatMap(CacheSource.init(rawValue:)) ?? .disk
            // Nil: gone since the answer, or replaced by a body with another digest than the one
            // asked for; a body being published is waited for (its row) inside.
            if let found = await openVerified(image) {
                return (.object(Self.members(found.entry, source: source)), PassedDescriptor(owning: found.file.descriptor))
            }
        }
        throw .other(
            code: FailureCode.disk.rawValue,
            message: "\(image.url.normalized) left the cache again as it was opened (evicted twice: is the cache too small?)")
    }
}

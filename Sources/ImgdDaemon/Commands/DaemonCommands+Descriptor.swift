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
    /// published (its rename may be ahead of its row) is asked for again after waits that double
    /// from 1 ms, 255 ms in all at most.
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
            var pause = Duration.milliseconds(1)
            while true {
                switch services.disk.openVerified(image.key) {
                case .opened(let file, let recorded):
                    let passed = PassedDescriptor(owning: file.descriptor)
                    // Replaced since the answer by a body with another digest than the one asked for.
                    guard image.expectedSHA256 == nil || image.expectedSHA256 == recorded.entry.sha256 else { break }
                    return (.object(Self.members(recorded, source: source)), passed)
                case .publishing where pause <= .milliseconds(128):
                    try? await Task.sleep(for: pause)
                    pause *= 2
                    continue
                case .publishing, .missing:
                    break
                }
                break
            }
        }
        throw .other(
            code: FailureCode.disk.rawValue,
            message: "\(image.url.normalized) left the cache again as it was opened (evicted twice: is the cache too small?)")
    }
}

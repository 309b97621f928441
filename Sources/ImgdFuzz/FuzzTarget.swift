/// One fuzz target per parser that reads untrusted bytes, each calling the code the daemon
/// calls. `make fuzz` runs each under libFuzzer (`imgd-fuzz`, built with `-sanitize=fuzzer`);
/// the test suite replays every committed corpus file and reproducer through the same
/// ``run(_:)``, so a finding fixed once stays fixed.
///
/// A target throws ``FuzzFinding`` when an invariant breaks (two reads of the same bytes
/// disagree, a reply is not JSON, a value does not survive a round trip); memory errors and
/// traps are caught by the sanitizers and libFuzzer themselves.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// The control socket: line framing, `JSONValue(parsing:)`, the request and its arguments,
    /// and the reply written back, through the daemon's own connection pipeline.
    case controlLine = "control-line"
    /// A text link list, read in random chunk sizes.
    case textList = "link-list-text"
    /// A JSON link list, read in random chunk sizes.
    case jsonList = "link-list-json"
    /// A plist link list, read in random chunk sizes.
    case plistList = "link-list-plist"
    /// An `.xml` link list (a sitemap, a sitemap index or a plist, by its root), read in random
    /// chunk sizes and from memory, as the daemon reads a sitemap it fetched.
    case xmlList = "link-list-xml"
    /// The image sniffer and validator (every format), with a declared length that may or may
    /// not match the body.
    case image = "image"
    /// The configuration file parser (TOML) and the settings it sets, as `imgd --config` reads them.
    case config = "config"
    /// The HTTP face: NIO's HTTP/1.1 decoder, the face's routes, query parameters, ranges and
    /// error responses, through the face's own connection pipeline.
    case httpRequest = "http-request"
    /// A warm set's tar stream (`imgctl import`): the ustar reader, read whole and in pieces.
    case tar = "tar"

    /// Runs the target on one input.
    public func run(_ input: UnsafeRawBufferPointer) throws(FuzzFinding) {
        var input = FuzzInput(input)
        switch self {
        case .controlLine: try ControlLineFuzzTarget.run(&input)
        case .textList: try LinkListFuzzTarget.run(&input, format: .text)
        case .jsonList: try LinkListFuzzTarget.run(&input, format: .json)
        case .plistList: try LinkListFuzzTarget.run(&input, format: .plist)
        case .xmlList: try LinkListFuzzTarget.run(&input, format: .xml)
        case .image: try ImageFuzzTarget.run(&input)
        case .config: try ConfigFuzzTarget.run(&input)
        case .httpRequest: try HTTPRequestFuzzTarget.run(&input)
        case .tar: try TarFuzzTarget.run(&input)
        }
    }

    /// Runs the target on `bytes`.
    public func run(_ bytes: [UInt8]) throws(FuzzFinding) {
        let finding: FuzzFinding? = bytes.withUnsafeBytes { raw in
            do throws(FuzzFinding) {
                try run(raw)
                return nil
            } catch {
                return error
            }
        }
        if let finding { throw finding }
    }
}

import ImgdCore
import ImgdStore

/// `get` latency, by the face that answered it and where the answer came from
/// (`imgd_get_duration_seconds{face,source}`): one ``DurationHistogram`` per pair, recorded
/// without a lock by whichever thread answered (an event loop or a command's task).
///
/// The control socket records from the moment its connection handler starts the request to the
/// moment the reply is handed to the channel. The HTTP face calls
/// ``recordGet(face:source:nanoseconds:)`` with `.http` for the same span of its own requests.
public final class DaemonHistograms: Sendable {
    /// Which listener answered.
    public enum Face: Int, Sendable, CaseIterable {
        case control, http

        public var label: String { self == .control ? "control" : "http" }
    }

    /// Where a `get`'s answer came from; `error` for every failed `get` (including those the
    /// network failed).
    public enum Source: UInt8, Sendable, CaseIterable {
        case memory = 1, disk, network, error

        /// The source of a hit from `tier`.
        public init(_ tier: CacheSource) {
            switch tier {
            case .memory: self = .memory
            case .disk: self = .disk
            case .network: self = .network
            }
        }

        public var label: String {
            switch self {
            case .memory: "memory"
            case .disk: "disk"
            case .network: "network"
            case .error: "error"
            }
        }
    }

    /// Indexed by `face.rawValue * 4 + source.rawValue - 1`.
    private let gets: [DurationHistogram]

    public init() {
        gets = (0..<(Face.allCases.count * Source.allCases.count)).map { _ in DurationHistogram() }
    }

    /// Counts one `get` answered by `face` from `source` in `nanoseconds`.
    public func recordGet(face: Face, source: Source, nanoseconds: UInt64) {
        gets[face.rawValue &* 4 &+ Int(source.rawValue) &- 1].record(nanoseconds: nanoseconds)
    }

    /// The histogram of one pair.
    public func getDuration(face: Face, source: Source) -> DurationHistogram {
        gets[face.rawValue * 4 + Int(source.rawValue) - 1]
    }
}

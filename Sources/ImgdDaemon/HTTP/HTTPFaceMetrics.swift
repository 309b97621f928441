import ImgdCore
import NIOHTTP1

/// The HTTP face's own counters (in `stats.http`): requests, responses by status class, and
/// the connections refused or timed out. Written on the event loops, two short locks a request.
final class HTTPFaceMetrics: Sendable {
    private let counts = Locked([Int](repeating: 0, count: Counter.allCases.count))

    enum Counter: Int, CaseIterable {
        case requests, malformed, busyRefusals, headerTimeouts
        case status2xx, status3xx, status4xx, status5xx

        var name: String {
            switch self {
            case .requests: "requests"
            case .malformed: "malformed"
            case .busyRefusals: "busy_refusals"
            case .headerTimeouts: "header_timeouts"
            case .status2xx: "responses_2xx"
            case .status3xx: "responses_3xx"
            case .status4xx: "responses_4xx"
            case .status5xx: "responses_5xx"
            }
        }
    }

    func increment(_ counter: Counter) {
        counts.withLock { $0[counter.rawValue] += 1 }
    }

    func count(status: HTTPResponseStatus) {
        let counter: Counter = switch status.code {
        case 200..<300: .status2xx
        case 300..<400: .status3xx
        case 400..<500: .status4xx
        default: .status5xx
        }
        counts.withLock { $0[counter.rawValue] += 1 }
    }

    /// Every counter by its name.
    var snapshot: [(String, Int)] {
        let values = counts.withLock { $0 }
        return Counter.allCases.map { ($0.name, values[$0.rawValue]) }
    }
}

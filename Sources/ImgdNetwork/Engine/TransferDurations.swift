import ImgdCore

/// How long transfers took, wire time from the attempt's start (its redirects and tier hops
/// included) to libcurl's end, by outcome: `ok` for a whole 2xx body or a 304, `failed` for
/// anything else (publishing and retries are not in it). Cancelled transfers are not counted.
public struct TransferDurations: Sendable {
    public let ok = DurationHistogram()
    public let failed = DurationHistogram()

    func record(_ duration: Duration, succeeded: Bool) {
        (succeeded ? ok : failed).record(duration)
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { true } else { false }
    }
}

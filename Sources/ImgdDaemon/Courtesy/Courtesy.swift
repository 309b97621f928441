import ImgdCore
import ImgdNetwork
import ImgdProtocol
import Logging

/// The courtesy loop's settings and state: whether it runs, its threshold and files, the cap
/// it set and why (`status.courtesy`). Turned by ``CourtesyService`` every
/// ``interval``; a reload replaces the settings (``update(enabled:threshold:files:)``).
final class Courtesy: Sendable {
    /// How often pressure is read: the kernel updates `avg10` every 2 s.
    static let interval: Duration = .seconds(2)

    struct State {
        var enabled: Bool
        var threshold: Double
        var reader: StallShareReader
        var controller: CourtesyController
        /// The last reading: the share, each file's, and the `max-parallel` it was taken against.
        var share: Double?
        var readings: [(file: String, avg10: Double?)] = []
        var cap: Int
        /// The cap last given to the downloader (nil: none below max-parallel).
        var applied: Int?
    }

    private let state: Locked<State>
    private let downloader: Downloader
    private let logger: Logger
    /// The `max-parallel` in force (the calendar window's, else the setting's).
    private let currentCap: @Sendable () -> Int

    init(
        enabled: Bool, threshold: Double, files: [String], downloader: Downloader, logger: Logger,
        currentCap: @escaping @Sendable () -> Int
    ) {
        let cap = currentCap()
        state = Locked(State(
            enabled: enabled, threshold: threshold, reader: StallShareReader(configured: files),
            controller: CourtesyController(cap: cap), cap: cap))
        self.downloader = downloader
        self.logger = logger
        self.currentCap = currentCap
    }

    /// A reload's settings; turned off, the cap goes back to `max-parallel` at once.
    func update(enabled: Bool, threshold: Double, files: [String]) {
        let reader = StallShareReader(configured: files)
        state.withLock { state in
            state.enabled = enabled
            state.threshold = threshold
            if state.reader != reader { state.reader = reader }
        }
        if !enabled { turn(now: .now) }
    }

    /// One turn of the loop: reads the pressure, steps the controller, and gives the downloader
    /// the new cap when it changed.
    func turn(now: ContinuousClock.Instant) {
        let cap = currentCap()
        let (enabled, reader) = state.withLock { ($0.enabled, $0.reader) }
        // Read outside the lock: `status` must not wait for a slow file.
        let reading = enabled ? reader.read() : (share: nil, readings: [])
        // The cap is given to the downloader under the lock: a reload's turn and the loop's must
        // not hand it over in the other order (the older would stay).
        let (before, after, threshold) = state.withLock { state -> (Int?, Int?, Double) in
            state.cap = cap
            state.share = reading.share
            state.readings = reading.readings
            let limit: Int
            if state.enabled {
                limit = state.controller.step(share: reading.share, threshold: state.threshold, cap: cap, now: now)
            } else {
                state.controller.reset(cap: cap)
                limit = cap
            }
            let before = state.applied
            state.applied = limit < cap ? limit : nil
            if before != state.applied { downloader.limitPrefetch(state.applied) }
            return (before, state.applied, state.threshold)
        }
        guard before != after else { return }
        if let after, before == nil {
            logger.notice("courtesy: the host's stall share is \(Self.percent(reading.share)) (over \(Self.percent(threshold))): prefetching \(after) at once instead of \(cap)")
        } else if after == nil {
            logger.notice("courtesy: prefetching at max-parallel (\(cap)) again")
        }
    }

    /// `status.courtesy`.
    var json: JSONValue {
        state.withLock { state in
            let limit = state.applied ?? state.cap
            let reason: String
            if !state.enabled {
                reason = "off (courtesy = false)"
            } else if state.readings.isEmpty {
                reason = "no reading yet"
            } else if state.share == nil {
                reason = "no pressure file could be read (\(state.reader.files.joined(separator: ", "))): the cap is left as it is"
            } else if let applied = state.applied {
                reason = "stall share \(Self.percent(state.share)) against a threshold of \(Self.percent(state.threshold)): prefetching \(applied) at once of \(state.cap)"
            } else {
                reason = "stall share \(Self.percent(state.share)) against a threshold of \(Self.percent(state.threshold)): no cap below max-parallel"
            }
            return .object([
                "enabled": .bool(state.enabled), "limit": JSONValue(limit), "cap": JSONValue(state.cap),
                "stall": state.share.map { JSONValue($0) } ?? .null, "threshold": JSONValue(state.threshold),
                "files": .array(state.readings.map { reading in
                    .object(["path": .string(reading.file), "avg10": reading.avg10.map { JSONValue($0) } ?? .null])
                }),
                "reason": .string(reason),
            ])
        }
    }

    private static func percent(_ value: Double?) -> String {
        guard let value else { return "unknown" }
        return DaemonSetting.spell(number: (value * 100).rounded() / 100) + "%"
    }
}

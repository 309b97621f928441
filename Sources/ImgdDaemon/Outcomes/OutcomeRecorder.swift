import ImgdCore
import ImgdNetwork
import ImgdProtocol

/// The one place where what became of a URL reaches clients besides their own reply: every
/// failure, whoever asked for the URL (a list, `add`, `retry` or `get`), is counted by its code
/// for `stats.failures` and published as a `failed` event; every download is published as a
/// `fetched` event. The spool's list events go out from here too.
final class OutcomeRecorder: Sendable {
    let events: EventHub
    let counters: DaemonCounters

    init(events: EventHub, counters: DaemonCounters) {
        self.events = events
        self.counters = counters
    }

    /// A URL's image was downloaded and cached.
    /// `servedBy`: the mirror the body came from, when not the URL (the event's `served_by`,
    /// absent otherwise).
    func fetched(url: String, bytes: Int, format: String, servedBy: String? = nil) {
        events.publish("fetched", data: Self.fetchedData(url: url, bytes: bytes, format: format, servedBy: servedBy))
    }

    /// A `fetched` event's data (made only when someone subscribes).
    private static func fetchedData(url: String, bytes: Int, format: String, servedBy: String?) -> JSONValue {
        var data: [String: JSONValue] = ["url": .string(url), "bytes": JSONValue(bytes), "format": .string(format)]
        if let servedBy { data["served_by"] = .string(servedBy) }
        return .object(data)
    }

    /// A URL failed with `code`.
    func failed(url: String, code: String, message: String) {
        counters.update { $0.failuresByCode[code, default: 0] += 1 }
        events.publish("failed", data: ["url": .string(url), "code": .string(code), "message": .string(message)])
    }

    /// What the downloader answered for `url`: a download (not an image found on disk) is
    /// `fetched`, a failure `failed`.
    func record(_ url: ImageURL, _ result: Result<CachedImage, DownloadError>) {
        switch result {
        case .success(let image):
            guard image.source == .network, let download = image.download else { return }
            fetched(url: url.normalized, bytes: image.bytes, format: download.image.format.rawValue, servedBy: download.servedBy)
        case .failure(let error):
            failed(url: url.normalized, code: error.code, message: error.message)
        }
    }

    /// What a revalidation came to: a `304` is a `revalidated` event (the entry was current); a
    /// new body a `fetched` one, a failure a `failed` one (the entry is still served).
    func revalidated(_ url: ImageURL, _ result: Result<CachedImage, DownloadError>) {
        if case .success(let image) = result, image.source == .disk {
            events.publish("revalidated", data: ["url": .string(url.normalized), "bytes": JSONValue(image.bytes)])
        } else {
            record(url, result)
        }
    }

    /// A spool event, as subscribers see it.
    func publish(_ event: SpoolEvent) {
        switch event {
        case .listClaimed(let name, let total):
            events.publish("list_claimed", data: ["name": .string(name), "total": JSONValue(total)])
        case .listDone(let record):
            var data: [String: JSONValue] = [
                "name": .string(record.name), "state": .string(record.state.rawValue), "cached": JSONValue(record.cached),
                "already_cached": JSONValue(record.alreadyCached), "failed": JSONValue(record.failed),
            ]
            if let readyBy = record.readyBy, let met = record.deadlineMet {
                data["ready_by"] = JSONValue(readyBy)
                data["deadline_met"] = .bool(met)
            }
            events.publish("list_done", data: .object(data))
        case .deadline(let name, let readyBy, let estimate):
            events.publish(estimate.atRisk ? "at_risk" : "on_track", data: [
                "name": .string(name), "ready_by": JSONValue(readyBy), "eta": estimate.eta.map { JSONValue($0) } ?? .null,
                "remaining": JSONValue(estimate.remaining),
                "rate": estimate.rate.map { JSONValue(($0 * 100).rounded() / 100) } ?? .null,
            ])
        case .fetched(let url, let bytes, let format, let servedBy):
            fetched(url: url, bytes: bytes, format: format, servedBy: servedBy)
        case .failed(let url, let code, let message):
            failed(url: url, code: code, message: message)
        case .refused:
            break
        }
    }
}

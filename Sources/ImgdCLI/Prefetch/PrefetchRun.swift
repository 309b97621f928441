import ImgdCore
import ImgdNetwork
import ImgdStore

/// One `imgd prefetch` run: reads the link lists as streams, fetches every URL through the
/// downloader, reports each failure as it happens and a summary at the end.
///
/// Each list is its own submitter, so lists take turns for transfer slots; each keeps at most
/// ``window`` fetches outstanding, so memory stays bounded however long a list is.
struct PrefetchRun {
    let lists: [String]
    let downloader: Downloader
    let console: Console
    let tally = PrefetchTally()

    /// Fetches in flight per list: enough to keep every slot busy, small enough to stay cheap.
    var window: Int { max(64, downloader.policy.maxParallel * 4) }

    /// Runs to the end. Returns the final counts.
    func run() async -> PrefetchTally.Counts {
        let clock = ContinuousClock()
        let started = clock.now
        await withTaskGroup(of: Void.self) { group in
            if console.isInteractive {
                group.addTask { await showProgress(since: started) }
            }
            await withTaskGroup(of: Void.self) { lists in
                for path in self.lists {
                    lists.addTask { await fetchList(at: path) }
                }
            }
            group.cancelAll()
        }
        console.clearProgress()
        return tally.snapshot
    }

    private func fetchList(at path: String) async {
        let submitter = downloader.makeSubmitter()
        var reader: LinkListReader
        do {
            reader = try LinkListReader(path: path)
        } catch {
            console.message("imgd: \(error)")
            tally.update { $0.failures["bad_list", default: 0] += 1 }
            return
        }
        await withTaskGroup(of: Void.self) { group in
            var outstanding = 0
            while true {
                let entry: LinkListEntry?
                do {
                    entry = try reader.next()
                } catch {
                    console.message("imgd: \(error)")
                    tally.update { $0.failures["bad_list", default: 0] += 1 }
                    break
                }
                guard let entry else { break }
                switch entry.url {
                case .failure(let error):
                    console.message("imgd: \(path):\(entry.line): bad_url: \(error): \(entry.text)")
                    tally.update { $0.failures["bad_url", default: 0] += 1 }
                case .success(let url):
                    tally.update { $0.listed += 1 }
                    if outstanding >= window {
                        await group.next()
                        outstanding -= 1
                    }
                    outstanding += 1
                    group.addTask { await fetch(url, submitter: submitter) }
                }
            }
        }
    }

    private func fetch(_ url: ImageURL, submitter: SubmitterID) async {
        do {
            let image = try await downloader.fetch(url, priority: .prefetch, submitter: submitter)
            tally.update { counts in
                switch image.source {
                case .disk: counts.alreadyCached += 1
                case .network:
                    counts.downloaded += 1
                    counts.downloadedBytes += image.bytes
                }
            }
        } catch {
            console.message("imgd: failed: \(url): \(error.code): \(error.message)")
            tally.update { $0.failures[error.code, default: 0] += 1 }
        }
    }

    private func showProgress(since started: ContinuousClock.Instant) async {
        while !Task.isCancelled {
            let counts = tally.snapshot
            let stats = downloader.statistics
            let seconds = Double((ContinuousClock.now - started).components.seconds)
                + Double((ContinuousClock.now - started).components.attoseconds) / 1e18
            let rate = seconds > 0 ? Int(Double(counts.finished) / seconds) : 0
            console.progress(
                "imgd: \(counts.finished)/\(counts.listed) done, \(stats.running) running, "
                    + "\(counts.failed) failed, \(ByteFormatting.string(counts.downloadedBytes)), \(rate) files/s")
            try? await Task.sleep(for: .milliseconds(200))
        }
    }

    /// The closing summary line.
    static func summary(_ counts: PrefetchTally.Counts, lists: Int, duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        var text = "imgd: \(counts.listed) URLs in \(lists) list\(lists == 1 ? "" : "s"): "
            + "\(counts.downloaded) downloaded (\(ByteFormatting.string(counts.downloadedBytes))), "
            + "\(counts.alreadyCached) already cached, \(counts.failed) failed"
        if !counts.failures.isEmpty {
            let parts = counts.failures.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.key) \($0.value)" }
            text += " (" + parts.joined(separator: ", ") + ")"
        }
        return text + " in \(ByteFormatting.oneDecimal(seconds)) s"
    }
}

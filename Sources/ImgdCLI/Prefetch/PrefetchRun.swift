#if canImport(Glibc)
import Glibc
#endif
import ImgdCore
import ImgdNetwork
import ImgdStore

/// One `imgd prefetch` run: reads the link lists as streams, fetches every URL through the
/// downloader, reports each failure as it happens and a summary at the end.
///
/// Each list is its own submitter, so lists take turns for transfer slots. URLs go to the
/// downloader in batches and are answered on its thread, so no task or thread hop is spent per
/// URL; each list keeps at most ``window`` URLs outstanding.
struct PrefetchRun {
    let lists: [String]
    let downloader: Downloader
    let console: Console
    let tally = PrefetchTally()

    /// URLs handed to the downloader and not yet answered, per list: enough to keep every
    /// transfer slot busy, small enough that a list of any length costs bounded memory.
    var window: Int { max(1024, downloader.policy.maxParallel * 16) }
    /// URLs handed over at a time.
    var batchSize: Int { window / 4 }

    /// Runs to the end. Returns the final counts.
    func run() async -> PrefetchTally.Counts {
        let started = ContinuousClock.now
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
        let window = PrefetchWindow(size: window)
        var reader: LinkListReader
        do {
            reader = try LinkListReader(path: path)
        } catch {
            console.message("imgd: \(error)")
            tally.update { $0.failures[FailureCode.badList.rawValue, default: 0] += 1 }
            return
        }
        var batch: [ImageRequest] = []
        batch.reserveCapacity(batchSize)
        // The namespace of the list's chosen keys: the running user's (asked once, not per line).
        let owner = getuid()
        while true {
            let entry: LinkListEntry?
            do {
                entry = try reader.next()
            } catch {
                console.message("imgd: \(error)")
                tally.update { $0.failures[FailureCode.badList.rawValue, default: 0] += 1 }
                break
            }
            guard let entry else { break }
            guard !entry.isSitemap else {
                // A sitemap index's children are fetched by the daemon's spool, which bounds them.
                console.message("imgd: \(path):\(entry.line): bad_list: a sitemap index's children are read only by the daemon's spool (drop the list there): \(EchoedText.cut(entry.text))")
                tally.update { $0.failures[FailureCode.badList.rawValue, default: 0] += 1 }
                continue
            }
            switch entry.url {
            case .failure(let error):
                console.message("imgd: \(path):\(entry.line): bad_url: \(error): \(EchoedText.cut(entry.text))")
                tally.update { $0.failures[FailureCode.badURL.rawValue, default: 0] += 1 }
            case .success(let url):
                // An object item's key, digest and mirrors count here as in the daemon (its pin
                // and priority mean nothing to a one-off run).
                var request = downloader.request(for: url, chosenKey: entry.options.key, owner: owner, sha256: entry.options.sha256)
                request.mirrors = entry.options.mirrors
                batch.append(request)
                if batch.count == batchSize {
                    await submit(batch, submitter: submitter, window: window)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        await submit(batch, submitter: submitter, window: window)
        await window.waitUntilEmpty()
    }

    private func submit(_ batch: [ImageRequest], submitter: SubmitterID, window: PrefetchWindow) async {
        guard !batch.isEmpty else { return }
        tally.update { $0.listed += batch.count }
        await window.acquire(batch.count)
        let tally = self.tally
        let console = self.console
        downloader.prefetch(batch, submitter: submitter) { url, result in
            switch result {
            case .success(let image):
                tally.update { counts in
                    switch image.source {
                    case .disk: counts.alreadyCached += 1
                    case .network:
                        counts.downloaded += 1
                        counts.downloadedBytes += image.bytes
                    }
                }
            case .failure(let error):
                console.message("imgd: failed: \(EchoedText.cut(url.normalized)): \(error.code): \(EchoedText.cut(error.message))")
                tally.update { $0.failures[error.code, default: 0] += 1 }
            }
            window.release()
        }
    }

    private func showProgress(since started: ContinuousClock.Instant) async {
        while !Task.isCancelled {
            let counts = tally.snapshot
            let stats = downloader.statistics
            let seconds = (ContinuousClock.now - started).inSeconds
            let rate = seconds > 0 ? Int(Double(counts.finished) / seconds) : 0
            console.progress(
                "imgd: \(counts.finished)/\(counts.listed) done, \(stats.running) running, "
                    + "\(counts.failed) failed, \(ByteFormatting.string(counts.downloadedBytes)), \(rate) files/s")
            try? await Task.sleep(for: .milliseconds(200))
        }
    }

    /// The closing summary line.
    static func summary(_ counts: PrefetchTally.Counts, lists: Int, duration: Duration) -> String {
        let seconds = duration.inSeconds
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

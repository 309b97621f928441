import ImgdCore
import ImgdStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Writes a list's report, `NAME.report.json`, beside its file in `done/` or `failed/`.
///
/// - **As a stream**: the JSON is written as it is produced, through a 64 KiB buffer
///   (``JSONStreamWriter``), and the failures are read from the database a page at a time, so a
///   report of 10,000 failures holds one page, not the whole document.
/// - **Echoed text is cut**: every text that came from a list or a server (its name, a URL, a
///   line, a message) is cut after ``echoLimit`` bytes with a marker `…[N more bytes]`
///   (``EchoedText/cut(_:limit:)``). It is not log-escaped (``EchoedText/escape(_:limit:)``
///   would put `\\n` where the text has a newline): the report is JSON and carries the text
///   itself, which JSON escapes (controls as `\n`, `\u001b`, …).
/// - **Never half-written**: under a temporary name first, synced, then renamed.
struct ListReportWriter: Sendable {
    /// Bytes of any one echoed text kept in a report: 512 (``EchoedText/defaultLimit``).
    static let echoLimit = EchoedText.defaultLimit
    /// Failures listed one by one in a report, at most (all are counted in `failed_by_code`).
    static let reportedFailures = 10_000
    /// What a report's name ends in (`NAME.report.json`); a list may not (it is refused).
    static let suffix = ".report.json"
    /// Failures read from the database at a time.
    static let pageSize = 256

    let folders: SpoolFolders
    let store: ListStore
    let logger: Logger

    /// The report of a file refused before it was read: `code` is its failure code, if it has one.
    func writeRefusal(name: String, reason: String, code: String?, as fileName: String) {
        write(as: fileName, in: folders.failed) { json in
            json.raw("{\n")
            if let code {
                json.raw("  \"code\": ")
                json.string(code)
                json.raw(",\n")
            }
            json.raw("  \"name\": ")
            json.string(name, limit: Self.echoLimit)
            json.raw(",\n  \"reason\": ")
            json.string(reason, limit: Self.echoLimit)
            json.raw(",\n  \"state\": \"refused\"\n}\n")
        }
    }

    /// The report of a finished list (keys in sorted order, one failure a line). Throws when the
    /// state database cannot give its failures: no report is written then (the finish is tried
    /// again), rather than one that leaves them out.
    func writeReport(for record: ListRecord, as fileName: String, in folder: Int32) throws(SQLiteError) {
        let failureCounts = try store.failureCounts(list: record.id)
        let mirrored = try store.servedByMirror(list: record.id, limit: Self.reportedFailures)
        // Written by the daemon's own claim (a JSON object, ``ListClaimer/SitemapWalk``).
        let sitemap = try store.sitemapSummary(list: record.id)
        let finishedAt = record.finishedAt ?? record.claimedAt
        try write(as: fileName, in: folder) { (json: inout JSONStreamWriter) throws(SQLiteError) in
            json.raw("{\n  \"already_cached\": ")
            json.int(record.alreadyCached)
            json.raw(",\n  \"bytes\": ")
            json.int(record.bytes)
            json.raw(",\n  \"cached\": ")
            json.int(record.cached)
            json.raw(",\n  \"claimed_at\": ")
            json.string(Self.rfc3339(record.claimedAt))
            if let met = record.deadlineMet {
                json.raw(",\n  \"deadline_met\": ")
                json.raw(met ? "true" : "false")
            }
            json.raw(",\n  \"duration_s\": ")
            json.raw("\(Double(finishedAt - record.claimedAt) / 1000)")
            if let expired = failureCounts[FailureCode.urlExpired.rawValue], expired > 0 {
                json.raw(",\n  \"expired\": [")
                let listed = try writeExpired(of: record.id, to: &json)
                json.raw(listed == 0 ? "]" : "\n  ]")
            }
            json.raw(",\n  \"failed\": ")
            json.int(record.failed)
            json.raw(",\n  \"failed_by_code\": {")
            for (index, code) in failureCounts.keys.sorted().enumerated() {
                json.raw(index == 0 ? "\n    " : ",\n    ")
                json.string(code, limit: Self.echoLimit)
                json.raw(": ")
                json.int(failureCounts[code]!)
            }
            json.raw(failureCounts.isEmpty ? "}" : "\n  }")
            json.raw(",\n  \"failures\": [")
            let listed = try writeFailures(of: record.id, to: &json)
            json.raw(listed == 0 ? "]" : "\n  ]")
            if record.failed > listed {
                json.raw(",\n  \"failures_truncated\": ")
                json.int(record.failed - listed)
            }
            json.raw(",\n  \"finished_at\": ")
            json.string(Self.rfc3339(finishedAt))
            json.raw(",\n  \"name\": ")
            json.string(record.name, limit: Self.echoLimit)
            if let readyBy = record.readyBy {
                json.raw(",\n  \"ready_by\": ")
                json.string(Self.rfc3339(readyBy))
            }
            // Only when a mirror served some URL: a list without mirrors reports as before.
            if !mirrored.isEmpty {
                json.raw(",\n  \"served_by_mirror\": [")
                for (index, item) in mirrored.enumerated() {
                    json.raw(index == 0 ? "\n    {\"line\": " : ",\n    {\"line\": ")
                    json.int(item.line)
                    json.raw(", \"served_by\": ")
                    json.string(item.servedBy, limit: Self.echoLimit)
                    json.raw(", \"url\": ")
                    json.string(item.url, limit: Self.echoLimit)
                    json.raw("}")
                }
                json.raw("\n  ]")
            }
            if let sitemap {
                json.raw(",\n  \"sitemap\": ")
                json.raw(sitemap)
            }
            json.raw(",\n  \"state\": ")
            json.string(record.state.rawValue)
            json.raw(",\n  \"total\": ")
            json.int(record.total)
            json.raw("\n}\n")
        }
    }

    /// Streams the list's failures, a page at a time, up to ``reportedFailures``. Returns how
    /// many were written.
    private func writeFailures(of list: Int, to json: inout JSONStreamWriter) throws(SQLiteError) -> Int {
        var written = 0
        var after = 0
        while written < Self.reportedFailures {
            let limit = min(Self.pageSize, Self.reportedFailures - written)
            let page = try store.failures(list: list, after: after, limit: limit)
            guard let last = page.last else { break }
            for failure in page.map(\.failure) {
                json.raw(written == 0 ? "\n    {\"code\": " : ",\n    {\"code\": ")
                json.string(failure.code, limit: Self.echoLimit)
                json.raw(", \"line\": ")
                json.int(failure.line)
                json.raw(", \"message\": ")
                json.string(failure.message, limit: Self.echoLimit)
                json.raw(", \"url\": ")
                json.string(failure.url, limit: Self.echoLimit)
                json.raw("}")
                written += 1
            }
            after = last.seq
            if page.count < limit { break }
        }
        return written
    }

    /// Streams the list's items that failed `url_expired` (``ListStore/expiredURLs(list:after:limit:)``),
    /// up to ``reportedFailures``, each with its URL, line, expiry and chosen key: what the
    /// dropper re-signs and drops again (`retry` does not requeue them). Returns how many.
    private func writeExpired(of list: Int, to json: inout JSONStreamWriter) throws(SQLiteError) -> Int {
        var written = 0
        var after = 0
        while written < Self.reportedFailures {
            let limit = min(Self.pageSize, Self.reportedFailures - written)
            let page = try store.expiredURLs(list: list, after: after, limit: limit)
            guard let last = page.last else { break }
            for item in page {
                json.raw(written == 0 ? "\n    {\"expires_at\": " : ",\n    {\"expires_at\": ")
                if let at = item.expiresAt { json.string(URLExpiry.iso8601(milliseconds: at)) } else { json.raw("null") }
                if let key = item.chosenKey {
                    json.raw(", \"key\": ")
                    json.string(key, limit: Self.echoLimit)
                }
                json.raw(", \"line\": ")
                json.int(item.line)
                json.raw(", \"url\": ")
                // Whole (a URL is at most 8 KiB): a signed URL is often longer than the echo
                // limit, and the dropper needs all of it to re-sign.
                json.string(item.url, limit: ImageURL.maximumLength)
                json.raw("}")
                written += 1
            }
            after = last.seq
            if page.count < limit { break }
        }
        return written
    }

    /// Writes `NAME.report.json` in `folder` through `body`: a temporary file, synced, then
    /// renamed over any report of the same name. When `body` throws, the temporary file goes and
    /// the error is rethrown: no report is better than one missing what it could not read.
    private func write<Failure: Error>(
        as name: String, in folder: Int32, _ body: (inout JSONStreamWriter) throws(Failure) -> Void
    ) throws(Failure) {
        let temp = ".\(name).report.json.tmp"
        let fd = openat(folder, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o640)
        guard fd >= 0 else {
            logger.forList(name).error("cannot write the list's report: \(String(cString: strerror(errno)))")
            return
        }
        var json = JSONStreamWriter(fileDescriptor: fd)
        do {
            try body(&json)
        } catch {
            close(fd)
            unlinkat(folder, temp, 0)
            throw error
        }
        json.flush()
        var failure = json.error
        if failure == nil, fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure == nil, renameat(folder, temp, folder, name + ".report.json") != 0 { failure = errno }
        if let failure {
            logger.forList(name).error("cannot write the list's report: \(String(cString: strerror(failure)))")
            unlinkat(folder, temp, 0)
        }
    }

    private static func rfc3339(_ milliseconds: Int) -> String {
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [UInt8](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let fraction = String(milliseconds % 1000)
        return String(decoding: buffer[..<length], as: UTF8.self) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
    }
}

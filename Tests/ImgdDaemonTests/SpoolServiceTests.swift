import Logging
import Foundation
import ImgdCore
@testable import ImgdDaemon
import ImgdNetwork
import ImgdStore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The spool service with its real parts: a spool folder watched by inotify, the state database,
/// the disk cache and the downloader, fetching from the real test HTTP server. Lists are dropped
/// as clients drop them (written aside, renamed in).
@Suite("Spool service: claim, warm, finish, cancel, retry, resume", .timeLimit(.minutes(5)), .offThePool)
struct SpoolServiceTests {
    /// Spool events in the order the service sent them.
    final class Events: Sendable {
        private let stored = Locked<[SpoolEvent]>([])
        func append(_ event: SpoolEvent) { stored.withLock { $0.append(event) } }
        var all: [SpoolEvent] { stored.withLock { $0 } }

        /// The records of the finished lists named `name`, in order.
        func done(_ name: String) -> [ListRecord] {
            all.compactMap { event in
                guard case .listDone(let record) = event, record.name == name else { return nil }
                return record
            }
        }
    }

    /// A scratch folder with a spool, a cache and a state database, and a service running on them.
    ///
    /// Sendable by construction: every member is a constant of a Sendable type, and the running
    /// service, which ``restart()`` replaces, is held under a lock.
    final class Fixture: Sendable {
        let folder: String
        let store: ListStore
        let disk: DiskCache
        let events: Events
        let logger: Logger
        private let running: Locked<(downloader: Downloader, spool: SpoolService)>

        var downloader: Downloader { running.withLock { $0.downloader } }
        var spool: SpoolService { running.withLock { $0.spool } }

        var spoolPath: String { folder + "/spool" }

        init() async throws {
            let folder = try ListStoreOwnerTests.scratch()
            let store = try ListStore(path: folder + "/state.sqlite")
            let disk = try DiskCache(root: folder + "/cache")
            self.folder = folder
            self.store = store
            self.disk = disk
            let logger = Logger.discarding
            let events = Events()
            self.logger = logger
            self.events = events
            running = Locked(try await Self.service(folder: folder, store: store, disk: disk, logger: logger, events: events))
        }

        private static func service(folder: String, store: ListStore, disk: DiskCache, logger: Logger, events: Events) async throws
            -> (downloader: Downloader, spool: SpoolService)
        {
            let downloader = try Downloader(cache: disk, policy: DownloadPolicy())
            let spool = try SpoolService(
                path: folder + "/spool", store: store, downloader: downloader, disk: disk, logger: logger,
                onEvent: { events.append($0) })
            try await spool.start()
            return (downloader, spool)
        }

        /// Stops the service as the daemon does (spool, then transfers, then the last outcomes).
        func stop() async {
            await spool.stop()
            await downloader.shutdown()
            await spool.finalFlush()
        }

        /// A new service on the same folders and database: what a restart runs.
        func restart() async throws {
            let service = try await Self.service(folder: folder, store: store, disk: disk, logger: logger, events: events)
            running.withLock { $0 = service }
        }

        func finish() async {
            await stop()
            try? disk.close()
            try? FileManager.default.removeItem(atPath: folder)
        }

        func drop(_ name: String, _ lines: [String]) throws {
            let temp = spoolPath + "/." + name + ".tmp"
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: temp))
            #expect(rename(temp, spoolPath + "/" + name) == 0)
        }

        /// The `n`th time the list named `name` finished, waiting up to a minute for it.
        func finished(_ name: String, time n: Int = 1) async -> ListRecord? {
            _ = await eventually(timeout: .seconds(60)) { events.done(name).count >= n }
            let done = events.done(name)
            return done.count >= n ? done[n - 1] : nil
        }

        func report(_ name: String, in folder: String) throws -> [String: Any] {
            let data = try Data(contentsOf: URL(fileURLWithPath: spoolPath + "/" + folder + "/" + name + ".report.json"))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }

        func exists(_ relative: String) -> Bool { FileManager.default.fileExists(atPath: spoolPath + "/" + relative) }
    }

    static func withFixture(_ body: (Fixture, TestHTTPServer) async throws -> Void) async throws {
        let server = try await TestHTTPServer.start()
        let fixture = try await Fixture()
        do {
            try await body(fixture, server)
        } catch {
            await fixture.finish()
            try await server.shutdown()
            throw error
        }
        await fixture.finish()
        try await server.shutdown()
    }

    @Test("a dropped list is claimed, every URL fetched into the cache, the file moved to done/ with a report; events in that order")
    func warmsAList() async throws {
        try await Self.withFixture { fixture, server in
            let targets = (0..<20).map { "/img/spool-\($0).png?w=8&h=8" }
            try fixture.drop("links.txt", targets.map(server.url))
            let record = try #require(await fixture.finished("links.txt"))
            #expect(record.state == .done && record.total == 20 && record.cached == 20 && record.failed == 0 && record.pending == 0)
            #expect(record.bytes == targets.reduce(0) { $0 + (TestHTTPServer.body(for: $1)?.count ?? 0) })
            for target in targets {
                #expect(fixture.disk.lookup(try ImageURL(server.url(target)).cacheKey) != nil, "\(target) is not in the cache")
                #expect(server.requestCount(target) == 1)
            }
            #expect(fixture.exists("done/links.txt") && !fixture.exists("links.txt"))
            #expect((try? FileManager.default.contentsOfDirectory(atPath: fixture.spoolPath + "/.claimed")) == [])
            let report = try fixture.report("links.txt", in: "done")
            #expect(report["state"] as? String == "done" && report["cached"] as? Int == 20)

            // Claimed, then each URL fetched, then done: nothing fetched before the claim or after the end.
            let events = fixture.events.all
            #expect(events.first == .listClaimed(name: "links.txt", total: 20))
            #expect(events.filter { if case .fetched = $0 { true } else { false } }.count == 20)
            #expect(events.last.map { if case .listDone = $0 { true } else { false } } == true)
            #expect(try fixture.store.list(record.id)?.state == .done)
            #expect(fixture.spool.progress.lists == 0)
        }
    }

    @Test("failures send the list to failed/ with each one in the report; retry fetches the failed URL again, not the bad line")
    func failuresAndRetry() async throws {
        try await Self.withFixture { fixture, server in
            try fixture.drop("mixed.txt", [
                server.url("/img/ok-1.png"), server.url("/status/404"), "not a url", server.url("/img/ok-2.png"),
            ])
            let record = try #require(await fixture.finished("mixed.txt"))
            #expect(record.state == .failed && record.cached == 2 && record.failed == 2)
            #expect(fixture.exists("failed/mixed.txt"))
            let report = try fixture.report("mixed.txt", in: "failed")
            #expect((report["failed_by_code"] as? [String: Any])?["http_404"] as? Int == 1, "\(report)")
            #expect((report["failed_by_code"] as? [String: Any])?["bad_url"] as? Int == 1, "\(report)")
            let failures = try #require(try fixture.spool.failures(list: "mixed.txt", afterSeq: 0, limit: 10))
            #expect(failures.map { $0.failure.code } == ["http_404", "bad_url"])
            #expect(failures.map { $0.failure.line } == [2, 3])
            #expect(try fixture.spool.failures(list: "nothing.txt", afterSeq: 0, limit: 10) == nil)

            // retry: only the 404 goes back; the list is taken back from failed/ and finishes again.
            #expect(try await fixture.spool.retry(list: "mixed.txt") == .requeued(1))
            let again = try #require(await fixture.finished("mixed.txt", time: 2))
            #expect(again.state == .failed && again.cached == 2 && again.failed == 2)
            #expect(server.requestCount("/status/404") == 2, "the failed URL was fetched again (its failure forgotten)")
            #expect(server.requestCount("/img/ok-1.png") == 1, "a cached URL was not")
            #expect(fixture.exists("failed/mixed.txt") && fixture.exists("failed/mixed.txt.report.json"))
            #expect(try await fixture.spool.retry(list: "nothing.txt") == .notFound)
        }
    }

    @Test("cancel: a list held by its server ends cancelled in failed/; unknown names and refused callers change nothing")
    func cancel() async throws {
        try await Self.withFixture { fixture, server in
            let held = (0..<5).map { server.url("/img/held-\($0).png?gate=spool-cancel") }
            try fixture.drop("held.txt", held)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(30)))
            #expect(try await fixture.spool.cancel(list: "other.txt") == .notFound)
            #expect(try await fixture.spool.cancel(list: "held.txt", if: { _ in false }) == .forbidden(owner: getuid()))
            #expect(fixture.events.done("held.txt").isEmpty, "a refused cancel ended the list")

            let outcome = try await fixture.spool.cancel(list: "held.txt")
            #expect(outcome == .cancelled(pending: 5))
            let record = try #require(await fixture.finished("held.txt"))
            #expect(record.state == .cancelled && record.failed == 5 && record.pending == 0)
            #expect(fixture.exists("failed/held.txt"))
            #expect(try fixture.store.failureCounts(list: record.id) == ["cancelled": 5])
            server.openGate("spool-cancel")
        }
    }

    @Test("stopped mid-list, then a new service on the same folders: the list resumes where it was, nothing fetched twice, nothing failed as cancelled")
    func resumesAfterStop() async throws {
        try await Self.withFixture { fixture, server in
            let quick = (0..<10).map { "/img/quick-\($0).png" }
            let held = (0..<3).map { "/img/resume-\($0).png?gate=spool-resume" }
            try fixture.drop("resume.txt", (quick + held).map(server.url))
            // The quick ones are recorded (outcomes are written in batches), the held ones in flight.
            let recorded = await eventually(timeout: .seconds(60)) {
                (try? fixture.store.lists().first { $0.name == "resume.txt" }?.cached) == 10
            }
            try #require(recorded)
            #expect(await server.waitForInFlight(atLeast: 1, timeout: .seconds(30)))
            await fixture.stop()
            let stopped = try #require(try fixture.store.lists().first { $0.name == "resume.txt" })
            #expect(stopped.state == .active && stopped.pending == 3 && stopped.failed == 0, "\(stopped)")
            #expect(fixture.events.done("resume.txt").isEmpty)

            server.openGate("spool-resume")
            try await fixture.restart()
            let record = try #require(await fixture.finished("resume.txt"))
            #expect(record.state == .done && record.cached == 13 && record.failed == 0)
            for target in quick { #expect(server.requestCount(target) == 1, "\(target) was fetched again") }
            #expect(fixture.exists("done/resume.txt"))
        }
    }
}

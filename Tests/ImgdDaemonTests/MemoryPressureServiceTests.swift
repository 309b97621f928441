import Logging
import Foundation
import ImgdCore
import ImgdDaemon
import ImgdStore
import ImgdMemoryPressure
import ImgdTestSupport
import Testing

@Suite("Memory pressure service", .timeLimit(.minutes(5)), .offThePool)
struct MemoryPressureServiceTests {
    @Test("a FIFO as MEMORY_PRESSURE_WATCH: one write empties the memory tier before the event is reported, and moves the counters")
    func fifoPurgesTheTier() async throws {
        let folder = try ScratchFolder("imgd-pressure").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let fifo = folder + "/pressure.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)

        let memory = MemoryCache(limitBytes: 1 << 20)
        for index in 0..<10 {
            memory.insert([UInt8](repeating: 1, count: 1000), for: try ImageURL("http://example.com/\(index).png").cacheKey)
        }
        let logged = LogLines()
        // What the tier held when the event was reported, read on the watching thread: the
        // purge comes first, so it is empty by then. (The latency from the write to the purge is
        // measured by bench/pressure-latency.sh, not asserted: on 2 shared cores it measures the
        // other suites.)
        // With it, how many events the service counted as answered then: this one already.
        let purgedAt = Locked<[(at: ContinuousClock.Instant, entries: Int, purged: Int, handled: Int)]>([])
        let serviceBox = Locked<MemoryPressureService?>(nil)  // the service exists only after its onEvent
        let service = MemoryPressureService(
            source: MemoryPressureSource.resolve(environment: ["MEMORY_PRESSURE_WATCH": fifo]), memory: memory,
            logger: .forwarding { logged.append($0) },
            onEvent: { _, purged in
                let handled = serviceBox.withLock { $0?.eventsHandled } ?? -1
                purgedAt.withLock { $0.append((.now, memory.statistics.entries, purged, handled)) }
            })
        serviceBox.withLock { $0 = service }
        let task = Task { try await service.run() }
        defer { task.cancel() }

        // The watch opens the FIFO for reading; a non-blocking writer can open once it has.
        var writer: Int32 = -1
        #expect(await eventually { writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC); return writer >= 0 })
        defer { close(writer) }
        #expect(memory.statistics.entries == 10)
        let sent = ContinuousClock.now
        var byte: UInt8 = 1
        #expect(write(writer, &byte, 1) == 1)
        // The event is reported after the purge: once it is, the tier must be empty.
        #expect(await eventually(timeout: .seconds(5)) { purgedAt.withLock { !$0.isEmpty } })
        let purged = try #require(purgedAt.withLock { $0.first })
        #expect(purged.at >= sent, "reported before the write")
        #expect(purged.entries == 0 && purged.purged == 10_000, "the event was reported before the tier was purged")
        #expect(purged.handled == 1, "the event was reported before it was counted as answered")
        #expect(memory.statistics.entries == 0)
        #expect(memory.statistics.purges == 1)
        #expect(service.monitor.eventCount == 1)
        #expect(service.eventsHandled == 1)
        #expect(logged.lines == [
            "memory pressure: watching \(fifo) (FIFO from MEMORY_PRESSURE_WATCH)",
            "memory pressure (systemd, event 1): purged the memory tier (10000 bytes)",
        ])
        // The tier refuses to refill during its cool-down.
        memory.insert([1, 2, 3], for: try ImageURL("http://example.com/again.png").cacheKey)
        #expect(memory.statistics.entries == 0)

        // The purge command is an event like any other.
        service.purge()
        #expect(service.monitor.eventCount == 2)
        #expect(service.eventsHandled == 2)
        #expect(memory.statistics.purges == 2)
    }
}

extension MemoryPressureServiceTests {
    @Test("a refused trigger: the log names the source really watched (avg10 polling, at the given threshold) and why",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/pressure/memory")))
    func loggedAfterFallback() async throws {
        let logged = LogLines()
        let service = MemoryPressureService(
            source: .psiTrigger(path: "/proc/pressure/memory", trigger: "nonsense"), memory: MemoryCache(limitBytes: 1 << 20),
            pollingThreshold: 42, logger: .forwarding { logged.append($0) })
        let task = Task { try await service.run() }
        #expect(await eventually(timeout: .seconds(30)) { !logged.lines.isEmpty })
        task.cancel()
        try await task.value
        #expect(logged.lines == [
            "memory pressure: reading avg10 of /proc/pressure/memory every 5s (pressure above 42.0%); "
                + "the kernel refused the trigger nonsense: Invalid argument"
        ])
        #expect(service.monitor.activeSource == .psiPolling(path: "/proc/pressure/memory", threshold: 42, interval: .seconds(5)))
    }
}

/// Log lines collected from any thread.
final class LogLines: Sendable {
    private let stored = Locked<[String]>([])
    func append(_ line: String) { stored.withLock { $0.append(line) } }
    var lines: [String] { stored.withLock { $0 } }
}

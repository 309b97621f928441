import ImgdCore
import Foundation
import ImgdTestSupport
import Testing

@testable import ImgdMemoryPressure

/// Real descriptors, real threads, no mocks. Serialized: the leak checks look at this process's
/// threads by name, and two tests watch /proc/pressure/memory.
@Suite("Memory pressure monitor", .serialized, .timeLimit(.minutes(5)), .offThePool)
struct MemoryPressureMonitorTests {
    /// A monitor whose descriptors are recorded and whose events are collected.
    private struct Fixture {
        let monitor: MemoryPressureMonitor
        let events = EventRecorder()
        let descriptors = DescriptorRecorder()

        init(_ source: MemoryPressureSource, pollingInterval: Duration = Fixture.pollingInterval) {
            let events = self.events
            monitor = MemoryPressureMonitor(
                source: source, pollingThreshold: 10, pollingInterval: pollingInterval,
                onDescriptorsOpened: descriptors.hook, onPressure: events.callback)
        }

        /// Starts `run()` and waits until its thread is watching.
        func start() async -> Task<Void, any Error> {
            let task = Task { [monitor] in try await monitor.run() }
            #expect(await eventually(timeout: Self.poolBound) { monitor.isWatching })
            return task
        }

        /// Cancels `task`, checks the watching thread stopped after the cancel and `run()`
        /// returned with nothing left open, and rethrows what it threw. The thread waits on its
        /// descriptors with no timeout (or a polling interval of an hour), so that it stops at
        /// all proves the cancel woke it; how long that takes is the suite's time limit's
        /// business, not an assertion (a loaded machine delays it, imgd does not).
        func stop(_ task: Task<Void, any Error>) async throws {
            let cancelled = ContinuousClock.now
            task.cancel()
            let outcome = await task.result
            let finished = try #require(monitor.threadFinishedAt)
            #expect(finished >= cancelled, "the thread stopped before it was cancelled")
            await expectNothingLeft()
            try outcome.get()
        }

        /// The polling interval of every fixture: an hour, so that nothing a test waits for can
        /// come from a polling tick instead of the event (or the cancel) it is about.
        static let pollingInterval = Duration.seconds(3600)

        /// How long a step that needs a thread of Swift's pool may take before it counts as a
        /// hang. Generous: on 2 cores, other suites blocking pool threads (in `waitUntilExit`)
        /// have delayed these tests by over 5 seconds. A waiting step returns as soon as its
        /// condition holds, so this costs nothing when the pool is free.
        static let poolBound = Duration.seconds(30)

        /// No descriptor the run opened is still open and its thread has exited.
        func expectNothingLeft() async {
            #expect(!descriptors.recorded.isEmpty)
            #expect(descriptors.stillOpen == [])
            // pthread_join returns once the thread has run its last instruction; the kernel
            // drops it from /proc/self/task a moment later, so this one check polls.
            #expect(await eventually(timeout: Self.poolBound) { !ProcessInspection.threadNames().contains("imgd-pressure") })
        }
    }

    private func environment(watch: String, write: String? = nil) -> [String: String] {
        var environment = ["MEMORY_PRESSURE_WATCH": watch]
        environment["MEMORY_PRESSURE_WRITE"] = write.map { Data($0.utf8).base64EncodedString() }
        return environment
    }

    @Test("a FIFO as MEMORY_PRESSURE_WATCH: each write is one event, delivered after the write by the wake-up, not a poll")
    func fifo() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        let path = folder.path + "/pressure.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        let source = MemoryPressureSource.resolve(environment: environment(watch: path))
        #expect(source == .systemdWatch(path: path, kind: .fifo, write: []))
        let fixture = Fixture(source)
        let task = await fixture.start()
        #expect(ProcessInspection.threadNames().contains("imgd-pressure"))

        let writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        #expect(writer >= 0)
        let sent = ContinuousClock.now
        TestSocket.send([1], to: writer)
        #expect(await eventually(timeout: Fixture.poolBound) { fixture.events.count == 1 })
        // Its latency is a bench figure (bench/pressure-latency.sh), not an assertion here.
        #expect(fixture.events.arrivals[0] >= sent)
        #expect(fixture.monitor.eventCount == 1)

        TestSocket.send([2, 3, 4], to: writer)
        #expect(await eventually(timeout: Fixture.poolBound) { fixture.events.count == 2 })
        #expect(fixture.events.recorded == [
            MemoryPressureEvent(origin: "systemd", count: 1), MemoryPressureEvent(origin: "systemd", count: 2),
        ])
        close(writer)  // a writer going away is not an event and does not end the watch
        #expect(fixture.monitor.isWatching)
        try await fixture.stop(task)
        #expect(fixture.monitor.eventCount == 2)
    }

    @Test("a socket as MEMORY_PRESSURE_WATCH: the server gets exactly the decoded bytes; data is an event; EOF ends with an error")
    func socket() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        let path = folder.path + "/pressure.sock"
        let listener = TestSocket.bound(at: path)
        defer { close(listener) }
        let source = MemoryPressureSource.resolve(environment: environment(watch: path, write: "some 150000 2000000"))
        let fixture = Fixture(source)
        let task = await fixture.start()

        let connection = try #require(TestSocket.accept(listener))
        #expect(TestSocket.read(connection, count: 19) == Array("some 150000 2000000".utf8))
        var extra = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
        #expect(poll(&extra, 1, 0) == 0)  // nothing more

        let sent = ContinuousClock.now
        TestSocket.send([0], to: connection)
        #expect(await eventually(timeout: Fixture.poolBound) { fixture.events.count == 1 })
        #expect(fixture.events.arrivals[0] >= sent)
        #expect(fixture.events.recorded == [MemoryPressureEvent(origin: "systemd", count: 1)])

        close(connection)
        await #expect(throws: MemoryPressureError.connectionClosed(path: path)) { try await task.value }
        await fixture.expectNothingLeft()
        // Nothing is watched any more, and status must not say otherwise.
        #expect(fixture.monitor.activeSource == .disabled(reason: MemoryPressureError.connectionClosed(path: path).description))
        // Cancelling a watch of a socket (instead of the server closing it) is clean too.
        let listenerAgain = Fixture(source)
        let again = await listenerAgain.start()
        let second = try #require(TestSocket.accept(listener))
        defer { close(second) }
        try await listenerAgain.stop(again)
    }

    @Test("a socket nobody listens on is a connection error")
    func socketRefused() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        let path = folder.path + "/pressure.sock"
        let bound = TestSocket.bound(at: path, listening: false)
        defer { close(bound) }
        let monitor = MemoryPressureMonitor(source: .systemdWatch(path: path, kind: .socket, write: [])) { _ in }
        await #expect(throws: MemoryPressureError.cannotConnect(path: path, errno: ECONNREFUSED)) { try await monitor.run() }
        #expect(
            MemoryPressureError.cannotConnect(path: path, errno: ECONNREFUSED).description
                == "cannot connect to memory pressure socket \(path): Connection refused (is the service listening there running?)")
    }

    @Test("a regular file as MEMORY_PRESSURE_WATCH receives the decoded MEMORY_PRESSURE_WRITE")
    func regularFile() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        let path = folder.path + "/memory.pressure"
        try folder.write("memory.pressure", "")
        let source = MemoryPressureSource.resolve(environment: environment(watch: path, write: "some 150000 2000000\0"))
        #expect(source == .systemdWatch(path: path, kind: .psiFile, write: Array("some 150000 2000000\0".utf8)))
        let fixture = Fixture(source)
        let task = await fixture.start()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("some 150000 2000000\0".utf8))
        try await fixture.stop(task)
        #expect(fixture.monitor.eventCount == 0)  // POLLPRI never fires on a regular file
    }

    @Test("the kernel's /proc/pressure/memory with the default trigger: starts, and stops cleanly",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/pressure/memory")))
    func realPressureFile() async throws {
        let fixture = Fixture(.psiTrigger(path: "/proc/pressure/memory", trigger: MemoryPressureSource.defaultTrigger))
        let task = await fixture.start()
        switch fixture.monitor.activeSource {
        case .psiTrigger(path: "/proc/pressure/memory", trigger: "some 200000 2000000"), .psiPolling(path: "/proc/pressure/memory", _, _):
            break
        default:
            Issue.record("unexpected active source \(fixture.monitor.activeSource)")
        }
        try await fixture.stop(task)
    }

    @Test("a trigger the kernel refuses falls back to polling avg10 of the same file",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/pressure/memory")))
    func refusedTrigger() async throws {
        // No kernel accepts this trigger (EINVAL), privileged or not.
        let fixture = Fixture(.psiTrigger(path: "/proc/pressure/memory", trigger: "nonsense"))
        let task = await fixture.start()
        #expect(fixture.monitor.activeSource == .psiPolling(path: "/proc/pressure/memory", threshold: 10, interval: Fixture.pollingInterval))
        #expect(await eventually(timeout: Fixture.poolBound) { fixture.monitor.readings >= 1 })  // read at once, not after the hour
        try await fixture.stop(task)
    }

    @Test("a refused trigger: run tells what it watches in the end (polling) and why, before any event",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/pressure/memory")))
    func refusedTriggerIsTold() async throws {
        let fixture = Fixture(.psiTrigger(path: "/proc/pressure/memory", trigger: "nonsense"))
        let told = Locked<[MemoryPressureWatching]>([])
        let monitor = fixture.monitor
        #expect(monitor.activeSource.code == "psi-trigger")  // what was asked for, until it is opened
        let task = Task { try await monitor.run { watching in told.withLock { $0.append(watching) } } }
        #expect(await eventually(timeout: Fixture.poolBound) { monitor.isWatching })
        let polling = MemoryPressureSource.psiPolling(path: "/proc/pressure/memory", threshold: 10, interval: Fixture.pollingInterval)
        #expect(told.withLock { $0 } == [MemoryPressureWatching(source: polling, refusal: .init(trigger: "nonsense", errno: EINVAL))])
        #expect(monitor.activeSource.code == "psi-poll")
        #expect(monitor.activeSource.path == "/proc/pressure/memory")
        try await fixture.stop(task)
    }

    @Test("polling: one event per rise of avg10 above the threshold, none while it stays above")
    func polling() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        let path = folder.path + "/memory.pressure"
        func pressure(_ avg10: String) throws {
            try folder.write("memory.pressure", "some avg10=\(avg10) avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        }
        /// Waits until a reading has started after now, so the file's current text was seen.
        func readAgain(_ monitor: MemoryPressureMonitor, times: Int = 2) async {
            let now = monitor.readings
            #expect(await eventually(timeout: Fixture.poolBound) { monitor.readings >= now + times })
        }
        try pressure("5.00")
        let fixture = Fixture(.psiPolling(path: path, threshold: 10, interval: .milliseconds(5)))
        let task = await fixture.start()
        await readAgain(fixture.monitor)
        #expect(fixture.events.count == 0)

        try pressure("12.50")
        #expect(await eventually(timeout: Fixture.poolBound) { fixture.events.count == 1 })
        try pressure("60.00")
        await readAgain(fixture.monitor, times: 3)
        #expect(fixture.events.count == 1)  // still above: no new event

        try pressure("9.99")
        await readAgain(fixture.monitor)
        #expect(fixture.events.count == 1)
        try pressure("10.01")
        #expect(await eventually(timeout: Fixture.poolBound) { fixture.events.count == 2 })
        #expect(fixture.events.recorded == [
            MemoryPressureEvent(origin: "avg10", count: 1), MemoryPressureEvent(origin: "avg10", count: 2),
        ])
        try await fixture.stop(task)
    }

    @Test("polling a file that is not a PSI file, or is missing, fails at start")
    func pollingBadFile() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        try folder.write("not-psi", "hello\n")
        let notPSI = MemoryPressureMonitor(source: .psiPolling(path: folder.path + "/not-psi", threshold: 10, interval: .seconds(1))) { _ in }
        await #expect(throws: MemoryPressureError.notAPressureFile(path: folder.path + "/not-psi")) { try await notPSI.run() }
        let missing = MemoryPressureMonitor(source: .psiTrigger(path: folder.path + "/missing", trigger: "some 200000 2000000")) { _ in }
        await #expect(throws: MemoryPressureError.cannotOpen(path: folder.path + "/missing", errno: ENOENT)) { try await missing.run() }
    }

    @Test("trigger() is an event like any other, with or without a running watch")
    func command() async throws {
        let fixture = Fixture(.disabled(reason: "test"))
        fixture.monitor.trigger()
        #expect(fixture.events.recorded == [MemoryPressureEvent(origin: "command", count: 1)])

        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        #expect(mkfifo(folder.path + "/fifo", 0o600) == 0)
        let watching = Fixture(.systemdWatch(path: folder.path + "/fifo", kind: .fifo, write: []))
        let task = await watching.start()
        watching.monitor.trigger()
        watching.monitor.trigger()
        #expect(watching.monitor.eventCount == 2)
        #expect(watching.events.recorded.map(\.origin) == ["command", "command"])
        try await watching.stop(task)
    }

    @Test("a disabled source watches nothing, and run() returns as soon as it is cancelled")
    func disabled() async throws {
        let monitor = MemoryPressureMonitor(source: .disabled(reason: "MEMORY_PRESSURE_WATCH is /dev/null")) { _ in }
        let task = Task { try await monitor.run() }
        #expect(await eventually(timeout: Fixture.poolBound) { monitor.activeSource == .disabled(reason: "MEMORY_PRESSURE_WATCH is /dev/null") })
        task.cancel()
        try await task.value  // returns at all: nothing but the cancel ends a disabled watch
        #expect(monitor.threadFinishedAt == nil, "a disabled source starts no thread")
    }

    @Test("a run whose task is already cancelled returns at once, leaving nothing open")
    func cancelledBeforeStart() async throws {
        let folder = try ScratchFolder("imgd-psi")
        defer { folder.remove() }
        #expect(mkfifo(folder.path + "/fifo", 0o600) == 0)
        let fixture = Fixture(.systemdWatch(path: folder.path + "/fifo", kind: .fifo, write: []))
        let started = ContinuousClock.now
        let task = Task { [monitor = fixture.monitor] in
            withUnsafeCurrentTask { $0?.cancel() }
            try await monitor.run()
        }
        try await task.value  // a FIFO with no writer never wakes the thread: only the cancel ends it
        let finished = try #require(fixture.monitor.threadFinishedAt)
        #expect(finished >= started)
        await fixture.expectNothingLeft()
    }

    @Test("errors say what to check")
    func messages() {
        #expect(
            MemoryPressureError.connectionClosed(path: "/run/p.sock").description
                == "memory pressure socket /run/p.sock closed the connection: no more pressure events from it until imgd restarts")
        #expect(
            MemoryPressureError.cannotOpen(path: "/x", errno: EACCES).description
                == "cannot open memory pressure file /x: Permission denied (check it exists and is readable, or set MEMORY_PRESSURE_WATCH=/dev/null to turn memory pressure off)")
    }

    @Test(
        "malloc_trim is found and gives freed heap memory back to the system",
        .disabled(if: Sanitizer.active != nil, "a sanitizer's allocator replaces glibc's heap, which is what malloc_trim trims"))
    func trim() {
        #expect(MallocTrim.isAvailable)
        // 32 MiB in 64 KiB blocks (below glibc's mmap threshold: heap memory), pinned at the top
        // by a small block allocated after them, then freed: free() alone cannot shrink the heap
        // past the pin; malloc_trim gives the freed pages back (and says so).
        let blocks = (0..<512).map { _ in malloc(64 * 1024)! }
        for block in blocks { memset(block, 1, 64 * 1024) }
        let pin = malloc(64)
        for block in blocks { free(block) }
        #expect(MallocTrim.releaseFreeMemory())
        free(pin)
    }
}

import Foundation
import ImgdCore
import ImgdTestSupport
import Testing

@testable import ImgdStore

@Suite("Cache maintainer", .timeLimit(.minutes(5)), .offThePool)
struct CacheMaintainerTests {
    private func settings(maxAge: Duration = .seconds(5)) -> MaintenanceSettings {
        var settings = MaintenanceSettings()
        settings.maxAge = maxAge
        settings.accessFlushInterval = .milliseconds(50)
        settings.healthInterval = .milliseconds(50)
        settings.pause = .milliseconds(1)
        return settings
    }

    @Test("the age sweep removes entries idle past the maximum age, by the injected clock, and keeps pins")
    func ageSweep() async throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let entries = try fixture.fill(10)  // last used at 1 s … 10 s
        try fixture.disk.index.pin(entries[0].key, until: 1_000_000)
        let clock = Shared(12_000)
        let maintainer = DiskCacheMaintainer(cache: fixture.disk, settings: settings(), now: { clock.current })

        // Now 12 s, maximum age 5 s: last used before 7 s goes (1 … 6 s), except the pinned first.
        let pass = await maintainer.sweepExpired(settings: settings())
        #expect(pass.files == 5)
        #expect(fixture.disk.lookup(entries[0].key) != nil)
        for entry in entries[1..<6] { #expect(fixture.disk.lookup(entry.key) == nil) }
        for entry in entries[6...] { #expect(fixture.disk.lookup(entry.key) != nil) }
        #expect(maintainer.status.expiredEntries == 5)
        #expect(try fixture.disk.index.totals() == (5, 500))
        #expect(fixture.disk.budget.snapshot.stored == 500)
    }

    @Test("a step of the system clock does not mass-evict: ages move with the monotonic clock")
    func clockStep() async throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let wallAtStart = 1_800_000_000_000
        try fixture.fill(20) { wallAtStart - 3_600_000 + $0 }  // used an hour before start
        let monotonic = Shared(500_000)
        let steady = SteadyWallClock(wallMilliseconds: wallAtStart, monotonicMilliseconds: 500_000)
        let maintainer = DiskCacheMaintainer(
            cache: fixture.disk, settings: settings(maxAge: .seconds(7 * 86400)),
            now: { steady.now(monotonicMilliseconds: monotonic.current) })

        // The system clock jumps 30 days ahead; one real second passes.
        let systemClock = wallAtStart + 30 * 86_400_000
        monotonic.current += 1000
        #expect(await maintainer.sweepExpired(settings: maintainer.settings).files == 0)
        #expect(systemClock - steady.now(monotonicMilliseconds: monotonic.current) > 29 * 86_400_000)
        // Seven real days on, the entries really are past their age.
        monotonic.current += 7 * 86_400_000
        #expect(await maintainer.sweepExpired(settings: maintainer.settings).files == 20)
    }

    @Test("a lower cap set at run time is enforced down to the low-water mark, least recently used first")
    func lowerLimitAtRunTime() async throws {
        let fixture = try CacheFixture(limit: 10_000)
        defer { fixture.remove() }
        let entries = try fixture.fill(50)  // 5,000 bytes
        let maintainer = DiskCacheMaintainer(cache: fixture.disk, settings: settings(maxAge: .seconds(86400 * 365 * 100)))
        let task = Task { await maintainer.run() }
        maintainer.update(maintainer.settings, diskLimit: 2_000)
        #expect(await eventually { fixture.disk.budget.snapshot.stored <= 1_800 })
        task.cancel()
        await task.value
        #expect(fixture.disk.budget.snapshot.stored == 1_800)  // 90% of 2,000, in 100-byte entries
        for entry in entries[..<32] { #expect(fixture.disk.lookup(entry.key) == nil) }
        for entry in entries[32...] { #expect(fixture.disk.lookup(entry.key) != nil) }
        #expect(maintainer.status.evictedEntries == 32)
    }

    @Test("while running: access times reach the index within the flush interval, and the reconcile finishes")
    func runFlushesAndReconciles() async throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let entries = try fixture.fill(5)
        // A file without a row, old enough to be a crash's leftover.
        let orphan = try ImageURL("http://example.com/orphan.png").cacheKey
        let file = try fixture.disk.directory.makeTempFile(for: orphan)
        try [UInt8](repeating: 7, count: 10).withUnsafeBytes { try file.write($0) }
        let orphanPath = try fixture.disk.directory.publish(file, as: orphan)
        var old = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, orphanPath, &old, 0) == 0)

        // Whole folders' worth per slice: at the default 500, walking the 65,536 fan-out folders
        // takes 132 slices, each behind a pause and a hop to the maintainer's queue, which on a
        // loaded 2-core machine added up to more than the deadline. Slicing is tested apart.
        var quick = settings(maxAge: .seconds(86400 * 365 * 100))
        quick.reconcileSlice = 70_000
        let maintainer = DiskCacheMaintainer(cache: fixture.disk, settings: quick)
        let task = Task { await maintainer.run() }
        fixture.disk.index.recordAccess(entries[0].key, at: 99_000)
        #expect(await eventually { (try? fixture.disk.index.entry(for: entries[0].key))??.lastAccess == 99_000 })
        #expect(await eventually(timeout: .seconds(30)) { maintainer.status.reconcileFinished })
        task.cancel()
        await task.value
        #expect(maintainer.status.reconcile.filesWithoutRow == 1)
        #expect(!FileManager.default.fileExists(atPath: orphanPath))
        for entry in entries { #expect(fixture.disk.lookup(entry.key) != nil) }
    }
}

@Suite("Disk tier health", .timeLimit(.minutes(5)), .offThePool)
struct DiskHealthTests {
    @Test("a cache folder removed at run time is created again, locked and indexed, and used from then on")
    func folderRemoved() throws {
        let fixture = try CacheFixture()
        defer { fixture.remove() }
        let before = try fixture.fill(3)
        #expect(fixture.disk.checkHealth() == DiskCacheHealth())

        try FileManager.default.removeItem(atPath: fixture.root)
        let health = fixture.disk.checkHealth()
        #expect(health.recreatedFolder)
        #expect(health.faults.isEmpty)
        #expect(FileManager.default.fileExists(atPath: fixture.root + "/index.sqlite"))
        #expect(fixture.disk.budget.snapshot.stored == 0)
        for entry in before { #expect(fixture.disk.lookup(entry.key) == nil) }

        // The new folder is ours: a second imgd cannot take it.
        #expect(throws: DiskCacheError.self) { try DiskCache(root: fixture.root) }
        // New entries land in it and are found.
        let after = try fixture.fill(2, from: 100)
        for entry in after { #expect(fixture.disk.lookup(entry.key) != nil) }
        #expect(try fixture.disk.index.totals() == (2, 200))
        #expect(fixture.disk.checkHealth() == DiskCacheHealth())
    }

    @Test("a cache folder that cannot be created again is a fault, and the check keeps trying")
    func folderCannotBeRecreated() throws {
        let parent = try ScratchFolder("imgd-parent").path("parent")
        let fixture = try CacheFixture(root: parent + "/cache")
        defer {
            fixture.remove()
            try? FileManager.default.removeItem(atPath: parent)
        }
        try FileManager.default.removeItem(atPath: parent)
        // A file where the parent folder was: nothing can be created under it, even by root.
        try Data("x".utf8).write(to: URL(fileURLWithPath: parent))
        let health = fixture.disk.checkHealth()
        #expect(health.faults.map(\.code) == ["cache_folder_missing"])
        #expect("\(health.faults[0])".contains(parent + "/cache"))

        try FileManager.default.removeItem(atPath: parent)
        let mended = fixture.disk.checkHealth()
        #expect(mended.recreatedFolder)
        #expect(mended.faults.isEmpty)
    }

    @Test("a filesystem with no inodes left is a fault; what is cached is still served; it clears once there is room",
          .enabled(if: TmpfsMount.isAvailable, "needs root to mount a tmpfs"))
    func outOfInodes() throws {
        let mount = try TmpfsMount(bytes: 4 << 20, inodes: 400)
        defer { mount.unmount() }
        let fixture = try CacheFixture(root: mount.path + "/cache")
        defer { try? fixture.disk.close() }
        let entries = try fixture.fill(3)
        // Someone else fills the filesystem's inode table.
        let filler = mount.path + "/filler"
        try FileManager.default.createDirectory(atPath: filler, withIntermediateDirectories: false)
        var made = 0
        while FileManager.default.createFile(atPath: filler + "/\(made)", contents: nil) { made += 1 }
        #expect(made > 0)

        let health = fixture.disk.checkHealth()
        #expect(health.faults.map(\.code) == ["cache_not_writable"])
        #expect(health.faults.first.map { "\($0)".contains("No space left on device") } == true)
        for entry in entries { #expect(fixture.disk.lookup(entry.key) != nil) }

        try FileManager.default.removeItem(atPath: filler)
        #expect(fixture.disk.checkHealth() == DiskCacheHealth())
    }
}

@Suite("Steady wall clock", .offThePool)
struct SteadyWallClockTests {
    @Test("moves with the monotonic clock from its anchor, whatever the system clock does")
    func steady() {
        let clock = SteadyWallClock(wallMilliseconds: 1_000_000, monotonicMilliseconds: 50)
        #expect(clock.now(monotonicMilliseconds: 50) == 1_000_000)
        #expect(clock.now(monotonicMilliseconds: 1_050) == 1_001_000)
    }
}

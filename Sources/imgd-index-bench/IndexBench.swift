import Foundation
import ImgdCore
import ImgdStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `imgd-index-bench`: the cache index at scale. Builds an index of N synthetic entries (rows
/// only: the files' part of a lookup, one `fstatat`, is not what is measured here), then
/// measures opening it (the work before READY), lookups, and lookups while 100,000 entries are
/// evicted beside them, then as many lookups again with nothing evicting. Lookups over 5 ms are
/// counted by where their time went (see ``LookupTime/Cause``): on a small shared machine most
/// are the thread waiting for a CPU, not the index at work. Prints a Markdown table. Run by
/// `bench/index-bench.sh`.
@main
struct IndexBench {
    static func main() throws {
        let arguments = CommandLine.arguments.dropFirst()
        var entries = 1_000_000
        var folder = "bench/work/index-bench"
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--entries": entries = Int(iterator.next() ?? "") ?? entries
            case "--dir": folder = iterator.next() ?? folder
            default:
                print("usage: imgd-index-bench [--entries N] [--dir DIR]")
                exit(2)
            }
        }
        let root = folder + "/cache"
        _ = system("rm -rf '\(folder)' && mkdir -p '\(folder)'")

        // 1. Build.
        let built = measure {
            let disk = try! DiskCache(root: root, limit: Int.max)
            var batch: [IndexEntry] = []
            batch.reserveCapacity(10_000)
            for index in 0..<entries {
                batch.append(Self.entry(index))
                if batch.count == 10_000 {
                    try! disk.record(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            try! disk.record(batch)
            try! disk.close()
        }
        var size = stat()
        stat(root + "/index.sqlite", &size)

        // 2. Open: what start-up does before READY (lock, folder, index, totals).
        var disk: DiskCache?
        let opened = measure { disk = try! DiskCache(root: root, limit: Int.max) }
        let cache = disk!

        // 3. Lookups of random present keys. Each is timed with this thread's clocks, so a slow
        // one can be told apart: on the CPU, waiting for a CPU, or blocked.
        var generator = SystemRandomNumberGenerator()
        let clock = ThreadClock()
        func lookUp() -> LookupTime {
            let key = Self.entry(Int.random(in: 0..<entries, using: &generator)).key
            return clock.measure { _ = try! cache.index.entry(for: key) }
        }
        let quiet = Percentiles((0..<100_000).map { _ in lookUp().wall })

        // 4. Evict 100,000 (budgeted passes) on one thread while this one keeps looking up.
        let evicting = Atomic<Bool>(true)
        let evicted = Atomic<Int>(0)
        let evictor = Thread { [cache] in
            while evicted.load(ordering: .relaxed) < 100_000 {
                let pass = try! cache.evictLeastRecentlyUsed(toFree: Int.max, now: 0)
                evicted.add(pass.files, ordering: .relaxed)
                if pass.files == 0 { break }
            }
            evicting.store(false, ordering: .relaxed)
        }
        let load = HostLoad.loadAverage()
        let stolenBefore = HostLoad.stolenMilliseconds()
        let readBefore = ThreadClock.storageReads()
        let sweepStart = ContinuousClock.now
        evictor.start()
        var during: [LookupTime] = []
        while evicting.load(ordering: .relaxed) {
            during.append(lookUp())
        }
        let sweep = ContinuousClock.now - sweepStart
        let stolen = HostLoad.stolenMilliseconds() - stolenBefore
        let readFromDisk = ThreadClock.storageReads() - readBefore
        let busy = Percentiles(during.map(\.wall))

        // 5. As many lookups again with nothing evicting beside them: what the machine alone does.
        let alone = (0..<during.count).map { _ in lookUp() }
        try cache.close()

        let slow = SlowLookups(during, over: 0.005)
        let slowAlone = SlowLookups(alone, over: 0.005)

        print("""
            | measure | value |
            |---|---|
            | entries | \(entries) |
            | build (10,000-row transactions) | \(format(built)) s |
            | index file | \(Int(size.st_size) / 1_048_576) MiB |
            | open (lock, folder, index, totals: the work before READY) | \(format(opened * 1000)) ms |
            | lookup p50 / p99 / max (100,000 random keys) | \(quiet.text) |
            | eviction of \(evicted.load(ordering: .relaxed)) entries (passes of \(DiskCache.evictionPassLimit)) | \(format(Double(sweep.components.seconds) + Double(sweep.components.attoseconds) / 1e18)) s |
            | lookups during the eviction: count, p50 / p99 / max | \(during.count), \(busy.text) |
            | lookups over 5 ms during the eviction | \(slow.count) |
            | of those: on the CPU over 5 ms (work) / waiting for a CPU / blocked (a lock, a disk read) / virtual CPU not run by the host | \(slow[.work]) / \(slow[.waitingForCPU]) / \(slow[.blocked]) / \(slow[.stolen]) |
            | lookups during the eviction that blocked at least once (a lock, a disk read) | \(during.filter(\.blocked).count) |
            | read from disk by the lookup thread during the eviction (page-cache misses) | \(format(Double(readFromDisk) / 1_048_576)) MiB |
            | lookups over 5 ms with nothing evicting (as many again, right after), by the same causes | \(slowAlone.text) |
            | machine: 1-minute load average before the eviction; virtual CPU time stolen by the host during it | \(load); \(stolen) ms |
            """)
    }

    /// A synthetic entry; its last access spreads entries over time so LRU has an order.
    static func entry(_ index: Int) -> IndexEntry {
        let url = "http://bench.example/\(index).png"
        let digest = SHA256Digest(of: url.utf8)
        return IndexEntry(
            key: CacheKey(digest: digest), url: url, bytes: 10_000 + index % 50_000, sha256: digest, format: .png,
            width: 64, height: 64, etag: nil, lastModified: nil, contentType: "image/png",
            fetchedAt: index, lastAccess: index)
    }

    static func measure(_ work: () -> Void) -> Double {
        let start = ContinuousClock.now
        work()
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func format(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}

/// p50, p99 and max of a set of latencies (seconds), printed in milliseconds.
struct Percentiles {
    let p50: Double, p99: Double, max: Double

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        func at(_ fraction: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }
        p50 = at(0.5)
        p99 = at(0.99)
        max = sorted.last ?? 0
    }

    var text: String {
        "\(IndexBench.format(p50 * 1000)) / \(IndexBench.format(p99 * 1000)) / \(IndexBench.format(max * 1000)) ms"
    }
}

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
/// evicted beside them. Prints a Markdown table. Run by `bench/index-bench.sh`.
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

        // 3. Lookups of random present keys.
        var generator = SystemRandomNumberGenerator()
        var latencies: [Double] = []
        for _ in 0..<100_000 {
            let key = Self.entry(Int.random(in: 0..<entries, using: &generator)).key
            latencies.append(measure { _ = try! cache.index.entry(for: key) })
        }
        let quiet = Percentiles(latencies)

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
        let sweepStart = ContinuousClock.now
        evictor.start()
        var during: [Double] = []
        while evicting.load(ordering: .relaxed) {
            let key = Self.entry(Int.random(in: 0..<entries, using: &generator)).key
            during.append(measure { _ = try! cache.index.entry(for: key) })
        }
        let sweep = ContinuousClock.now - sweepStart
        let busy = Percentiles(during)
        try cache.close()

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
            | lookups over 5 ms during the eviction | \(during.filter { $0 > 0.005 }.count) |
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

import ImgdCore
import Testing

@Suite("DurationHistogram")
struct DurationHistogramTests {
    @Test("each duration in the bucket whose bound is the first at or above it; over 60 s in +Inf; the sum exact")
    func buckets() {
        let histogram = DurationHistogram()
        let durations: [UInt64] = [0, 100_000, 100_001, 999_999, 1_000_000, 60_000_000_000, 60_000_000_001, 3_600_000_000_000]
        for duration in durations { histogram.record(nanoseconds: duration) }
        let snapshot = histogram.snapshot()
        var expected = [UInt64](repeating: 0, count: 19)
        expected[0] = 2  // 0 and 100 µs (le 0.0001)
        expected[1] = 1  // 100.001 µs (le 0.00025)
        expected[3] = 2  // 999.999 µs and 1 ms (le 0.001)
        expected[17] = 1  // 60 s (le 60)
        expected[18] = 2  // over 60 s
        #expect(snapshot.counts == expected)
        #expect(snapshot.count == UInt64(durations.count))
        #expect(snapshot.sumNanoseconds == durations.reduce(0, +))
        #expect(DurationHistogram.boundsSeconds.first == 0.0001 && DurationHistogram.boundsSeconds.last == 60)
        #expect(DurationHistogram.boundsSeconds == DurationHistogram.boundsSeconds.sorted())
    }

    @Test("a Duration: negative counts as zero, fractions to the nanosecond")
    func durations() {
        let histogram = DurationHistogram()
        histogram.record(.milliseconds(-5))
        histogram.record(.microseconds(1500))
        let snapshot = histogram.snapshot()
        #expect(snapshot.counts[0] == 1 && snapshot.counts[4] == 1)
        #expect(snapshot.sumNanoseconds == 1_500_000)
    }

    @Test("records from many threads at once all count (no lock, no lost add)")
    func concurrent() async {
        let histogram = DurationHistogram()
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<10_000 { histogram.record(nanoseconds: UInt64((task * 10_000 + index) * 1000)) }
                }
            }
        }
        #expect(histogram.snapshot().count == 80_000)
    }
}

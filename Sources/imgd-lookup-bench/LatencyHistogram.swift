/// Latencies in nanoseconds, counted in log-linear buckets (the HdrHistogram layout): exact
/// below 256 ns, then 128 buckets per power of two, so a bucket is at most 1/128 (0.8%) wide
/// relative to its values. Recording is an add to an array slot, with no allocation, and a
/// histogram's size does not grow with the number of requests (about 36 KB for anything up to
/// 2^40 ns, 18 minutes), so every request of every client can be counted.
struct LatencyHistogram {
    /// Values below this are their own bucket.
    private static let exactBelow: UInt64 = 256
    /// Buckets per power of two above `exactBelow`.
    private static let perOctave = 128
    /// Powers of two covered above `exactBelow` (2^8 … 2^40 ns); longer latencies count in the last bucket.
    private static let octaves = 32

    private var counts = [UInt64](repeating: 0, count: Int(exactBelow) + octaves * perOctave)
    private(set) var total: UInt64 = 0
    private(set) var maximum: UInt64 = 0

    mutating func record(_ nanoseconds: UInt64) {
        counts[Self.bucket(of: nanoseconds)] &+= 1
        total &+= 1
        if nanoseconds > maximum { maximum = nanoseconds }
    }

    mutating func add(_ other: LatencyHistogram) {
        for index in counts.indices { counts[index] &+= other.counts[index] }
        total &+= other.total
        maximum = max(maximum, other.maximum)
    }

    /// The latency below which `fraction` of the recorded ones fall (the middle of its bucket), in nanoseconds.
    func percentile(_ fraction: Double) -> UInt64 {
        guard total > 0 else { return 0 }
        let rank = max(1, UInt64((Double(total) * fraction).rounded(.up)))
        var seen: UInt64 = 0
        for index in counts.indices {
            seen &+= counts[index]
            if seen >= rank { return min(Self.middle(of: index), maximum) }
        }
        return maximum
    }

    private static func bucket(of value: UInt64) -> Int {
        if value < exactBelow { return Int(value) }
        // `shift` brings the value's top 8 bits into [128, 256).
        let shift = (64 - value.leadingZeroBitCount) - 8
        let index = Int(exactBelow) + (shift - 1) * perOctave + Int(value >> UInt64(shift)) - perOctave
        return min(index, Int(exactBelow) + octaves * perOctave - 1)
    }

    private static func middle(of index: Int) -> UInt64 {
        if index < Int(exactBelow) { return UInt64(index) }
        let above = index - Int(exactBelow)
        let shift = UInt64(above / perOctave + 1)
        let top = UInt64(above % perOctave + perOctave)
        return (top << shift) + (1 << shift) / 2
    }
}

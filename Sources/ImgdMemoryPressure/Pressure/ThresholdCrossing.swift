/// Turns a series of readings into events: one each time a reading rises above the threshold
/// after being at or below it, so a long stretch of pressure is one event, not one per read.
struct ThresholdCrossing {
    let threshold: Double
    /// Starts below: pressure already high when watching begins is reported once.
    private(set) var isAbove = false

    init(threshold: Double) {
        self.threshold = threshold
    }

    /// Takes a reading; true when it is the first above the threshold since the last one below.
    mutating func update(_ reading: Double) -> Bool {
        let above = reading > threshold
        defer { isAbove = above }
        return above && !isAbove
    }
}

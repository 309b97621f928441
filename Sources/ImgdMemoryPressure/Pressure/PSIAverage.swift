/// Reading a PSI file's text: `some avg10=1.23 avg60=… avg300=… total=…` (memory, and the
/// courtesy loop's cpu and io).
public enum PSIAverage {
    /// The most a PSI file is read: two lines of under 100 bytes each, with room to spare.
    static let readLimit = 1024

    /// The `avg10` percentage of the `some` line; nil when there is no such line (a file being
    /// rewritten, or not a PSI file).
    public static func someAvg10(in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("some ") {
            for field in line.split(separator: " ") where field.hasPrefix("avg10=") {
                return Double(field.dropFirst("avg10=".count))
            }
        }
        return nil
    }

    /// Reads `path` and returns its `some` `avg10`.
    public static func read(_ path: String) throws(MemoryPressureError) -> Double? {
        someAvg10(in: String(decoding: try DescriptorIO.readFile(path, limit: readLimit), as: UTF8.self))
    }
}

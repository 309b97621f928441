/// Human-readable sizes for summaries: "327.1 MB" (decimal units, as curl and wget print).
enum ByteFormatting {
    static func string(_ bytes: Int) -> String {
        let units = ["B", "kB", "MB", "GB", "TB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(oneDecimal(value)) \(units[unit])"
    }

    /// `12.3`: one decimal, without Foundation's formatters.
    static func oneDecimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}

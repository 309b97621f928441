/// A plain-text table: a header row and left-aligned columns padded with spaces, the last
/// column unpadded (it is usually a URL or a message of any length). Cells are escaped for a
/// terminal (``HumanFormat/text(_:)``): they hold names and URLs anyone may have written.
struct TableRenderer {
    var header: [String]
    var rows: [[String]] = []

    init(header: [String]) {
        self.header = header
    }

    mutating func append(_ row: [String]) {
        rows.append(row.map(HumanFormat.text))
    }

    /// The table's lines, without newlines.
    func lines() -> [String] {
        let all = [header] + rows
        var widths = [Int](repeating: 0, count: header.count)
        for row in all {
            for (column, cell) in row.enumerated() where column < widths.count {
                widths[column] = max(widths[column], cell.count)
            }
        }
        return all.map { row in
            var line = ""
            for (column, cell) in row.enumerated() {
                if column > 0 { line += "  " }
                let isLast = column == row.count - 1
                line += isLast ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }
            return line
        }
    }
}

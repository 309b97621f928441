/// Draws `warm --wait`'s progress on stderr: on a terminal one line per list, redrawn in place
/// (the cursor moves back up over the previous drawing); elsewhere (a log, a pipe) a plain line
/// per list when its state changes, or at most every `plainInterval` while its counts move.
final class ListProgressRenderer {
    /// The width of the bar between brackets.
    static let barWidth = 24
    /// Names longer than this are shortened, so a line fits a terminal.
    static let nameWidth = 32

    private let output: any OutputSink
    private let isTerminal: Bool
    private let plainInterval: Duration
    /// Lines drawn last time on a terminal (to move the cursor back over them).
    private var drawnLines = 0
    /// For plain output: what was last printed per list, and when.
    private var lastPlain: [String: (text: String, state: String?, at: ContinuousClock.Instant)] = [:]

    init(output: any OutputSink, isTerminal: Bool, plainInterval: Duration) {
        self.output = output
        self.isTerminal = isTerminal
        self.plainInterval = plainInterval
    }

    /// Shows the lists' current progress.
    func draw(_ lists: [ListProgress], now: ContinuousClock.Instant = .now) {
        let nameWidth = min(Self.nameWidth, lists.map { HumanFormat.text($0.name).count }.max() ?? 0)
        if isTerminal {
            // Up over the previous drawing, then each line cleared and rewritten.
            var text = drawnLines > 0 ? "\u{1B}[\(drawnLines)A" : ""
            for list in lists {
                text += "\r\u{1B}[K" + Self.line(list, nameWidth: nameWidth) + "\n"
            }
            drawnLines = lists.count
            output.write(text)
            return
        }
        for list in lists {
            let text = Self.line(list, nameWidth: 0)
            let last = lastPlain[list.name]
            let stateChanged = last == nil || last?.state != list.state
            let due = last.map { $0.text != text && now - $0.at >= plainInterval } ?? true
            guard stateChanged || due else { continue }
            lastPlain[list.name] = (text, list.state, now)
            output.line("imgctl: " + text)
        }
    }

    /// `links.txt  [##########..............]  45/100  cached 40, already 5, failed 0`.
    static func line(_ list: ListProgress, nameWidth: Int) -> String {
        var name = HumanFormat.text(list.name)
        if name.count > nameWidth, nameWidth > 1 { name = String(name.prefix(nameWidth - 1)) + "…" }
        name += String(repeating: " ", count: max(0, nameWidth - name.count))
        guard let state = list.state else { return "\(name)  waiting for imgd to claim it" }
        let counts =
            "cached \(HumanFormat.count(list.cached)), already \(HumanFormat.count(list.alreadyCached)), "
            + "failed \(HumanFormat.count(list.failed))"
        guard let total = list.total else { return "\(name)  \(state)  \(counts)" }
        let filled = total > 0 ? min(barWidth, list.settled * barWidth / total) : barWidth
        let bar = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: barWidth - filled) + "]"
        let label = list.isFinished ? "  \(state)" : ""
        return "\(name)  \(bar)  \(HumanFormat.count(list.settled))/\(HumanFormat.count(total))  \(counts)\(label)"
    }
}

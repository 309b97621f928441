import ImgdProtocol

/// `warm --wait`: follows submitted link lists until each has finished, showing progress.
///
/// The connection is subscribed to `list_done` before the lists are dropped, so an ending is
/// seen the moment it happens; the counts in between come from `lists`, asked every poll
/// interval (200 ms), which is also the fallback if an event was dropped. A list the daemon
/// refused outright (not a regular file) never shows in `lists`: it is found by its report in
/// the spool's `failed/` folder.
struct ListWaiter {
    let session: ControlSession
    /// The spool folder, for the reports of lists that never show up in `lists`.
    let spool: String

    /// Waits for every list of `names`; returns their final progress, in the same order.
    func wait(for names: [String]) throws(ImgctlError) -> [ListProgress] {
        var lists = names.map { ListProgress(name: $0) }
        let context = session.context
        let renderer = ListProgressRenderer(
            output: context.standardError, isTerminal: context.standardErrorIsTerminal,
            plainInterval: context.pollInterval * 10)
        while true {
            try refresh(&lists)
            renderer.draw(lists)
            if lists.allSatisfy(\.isFinished) { return lists }
            try drainEvents(into: &lists, for: context.pollInterval)
        }
    }

    /// Updates every list from `lists`, or from its report when the daemon does not list it.
    private func refresh(_ lists: inout [ListProgress]) throws(ImgctlError) {
        let result = try session.call("lists", echo: false)
        var entries: [String: JSONValue] = [:]
        // Most recent first: keep the first entry of a name.
        for entry in result["lists"]?.arrayValue ?? [] {
            if let name = entry["name"]?.stringValue, entries[name] == nil { entries[name] = entry }
        }
        for index in lists.indices where !lists[index].isFinished || entries[lists[index].name] != nil {
            let name = lists[index].name
            if let entry = entries[name] {
                lists[index].update(from: entry)
            } else if let report = report(of: name) {
                lists[index].update(from: report)
            }
        }
    }

    /// Reads events until `interval` has passed; a `list_done` of one of ours marks it finished.
    private func drainEvents(into lists: inout [ListProgress], for interval: Duration) throws(ImgctlError) {
        let deadline = ContinuousClock.now + interval
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { return }
            switch try session.client.nextEvent(timeout: left) {
            case .timedOut:
                return
            case .closed:
                throw .connectionLost(socket: session.client.socketPath)
            case .event(let event):
                guard event.name == "list_done", let name = event.data["name"]?.stringValue,
                    let index = lists.firstIndex(where: { $0.name == name })
                else { continue }
                lists[index].update(from: event.data)
                return  // ask `lists` at once for the final counts
            }
        }
    }

    /// `NAME.report.json` from the spool's `done/` or `failed/`, once the list is no longer
    /// waiting in the spool itself.
    private func report(of name: String) -> JSONValue? {
        guard !ImgctlContext.lstatExists(spool + "/" + name) else { return nil }
        for folder in ["failed", "done"] {
            if let data = ImgctlContext.contents(of: "\(spool)/\(folder)/\(name).report.json"),
                let report = (try? JSONValue(parsing: data)), report["state"]?.stringValue != nil
            {
                return report
            }
        }
        return nil
    }
}

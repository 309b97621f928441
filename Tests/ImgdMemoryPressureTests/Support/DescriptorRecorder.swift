import ImgdCore

/// Records what the descriptors a monitor run opened refer to (through the monitor's
/// `onDescriptorsOpened` seam), so a test can check that none is still open afterwards.
/// Targets such as "socket:[1234]" name one object, so tests running at the same time cannot
/// be mistaken for a leak.
final class DescriptorRecorder: Sendable {
    private let targets = Locked<[String]>([])

    /// The hook to pass as `onDescriptorsOpened`.
    var hook: @Sendable ([Int32]) -> Void {
        { [self] descriptors in
            let found = descriptors.compactMap(ProcessInspection.target(of:))
            targets.withLock { $0 += found }
        }
    }

    /// Targets recorded so far.
    var recorded: [String] { targets.withLock { $0 } }

    /// Recorded targets still open now.
    var stillOpen: [String] {
        let open = Set(ProcessInspection.openTargets())
        return recorded.filter(open.contains)
    }
}

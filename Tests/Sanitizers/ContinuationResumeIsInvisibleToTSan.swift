// The proof behind tsan.supp's `race:Scc6resume` (see README.md here): built with -O, so that
// UnsafeContinuation.resume and withUnsafeThrowingContinuation are specialised into this file
// and their accesses instrumented, it reports a race between the resume's store of the result
// and the resumed task's load of it, although the only hand-off is the continuation itself.
import Foundation

final class Answer: Sendable {}

/// Two threads that resume each continuation as soon as they are handed it, so that a resume
/// often comes before the task has suspended. (`@unchecked`: `condition` guards `waiting`.)
final class Resumer: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting: [UnsafeContinuation<Answer, any Error>] = []

    func start() {
        for _ in 0..<2 {
            Thread {
                while true {
                    self.condition.lock()
                    while self.waiting.isEmpty { self.condition.wait() }
                    let continuation = self.waiting.removeFirst()
                    self.condition.unlock()
                    continuation.resume(returning: Answer())
                }
            }.start()
        }
    }

    func hand(_ continuation: UnsafeContinuation<Answer, any Error>) {
        condition.lock()
        waiting.append(continuation)
        condition.signal()
        condition.unlock()
    }
}

let resumer = Resumer()

@main struct ContinuationResumeIsInvisibleToTSan {
    static func main() async throws {
        resumer.start()
        let received = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20_000 {
                group.addTask {
                    _ = try await withUnsafeThrowingContinuation { resumer.hand($0) }
                    return 1
                }
            }
            return try await group.reduce(0, +)
        }
        print("received \(received) results")
    }
}

import ImgdTestSupport
import Synchronization
import Testing

@testable import ImgdCore

#if canImport(Glibc)
import Glibc
#endif

@Suite("Promise: a value set once, from any thread, awaited by any number of tasks", .timeLimit(.minutes(2)), .offThePool)
struct PromiseTests {
    @Test("set before anyone waits: both kinds of wait return it at once, and so does current")
    func fulfilledBeforeWaiting() async throws {
        let promise = Promise<Int>()
        #expect(promise.current == nil)
        #expect(promise.fulfill(7))
        #expect(promise.current == 7)
        #expect(await promise.value == 7)
        #expect(try await promise.wait() == 7)
        #expect(promise.waiterCount == 0)
    }

    @Test("a task waiting before the value is set is resumed with it")
    func waitingBeforeFulfilled() async throws {
        let promise = Promise<String>()
        let waiter = Task { await promise.value }
        #expect(await eventually { promise.waiterCount == 1 })
        #expect(promise.fulfill("done"))
        #expect(await waiter.value == "done")
        #expect(promise.waiterCount == 0)
    }

    @Test("every one of several waiters, of both kinds, gets the one value")
    func severalWaiters() async throws {
        let promise = Promise<Int>()
        let results = await withTaskGroup(of: Int?.self) { group in
            for index in 0..<20 {
                group.addTask { index.isMultiple(of: 2) ? await promise.value : try? await promise.wait() }
            }
            #expect(await eventually { promise.waiterCount == 20 })
            #expect(promise.fulfill(42))
            return await group.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(results.count == 20)
        #expect(results.allSatisfy { $0 == 42 })
        #expect(promise.waiterCount == 0)
    }

    @Test("a second fulfil is ignored and says so: waiters, current and later waiters see the first value")
    func secondFulfilIgnored() async throws {
        let promise = Promise<Int>()
        let waiter = Task { await promise.value }
        #expect(await eventually { promise.waiterCount == 1 })
        #expect(promise.fulfill(1))
        #expect(!promise.fulfill(2))
        #expect(await waiter.value == 1)
        #expect(promise.current == 1)
        #expect(await promise.value == 1)
    }

    @Test("an optional value of nil counts as set: waiters get nil, not a wait without end")
    func optionalValueNil() async throws {
        let promise = Promise<Int?>()
        let waiter = Task { await promise.value }
        #expect(await eventually { promise.waiterCount == 1 })
        #expect(promise.fulfill(nil))
        #expect(!promise.fulfill(3))
        #expect(await waiter.value == nil)
        #expect(try await promise.wait() == nil)
    }

    @Test("a cancelled waiter leaves at once, with CancellationError, and the others still get the value")
    func cancelledWaiterLeaves() async throws {
        let promise = Promise<Int>()
        let leaving = Task { () -> Bool in
            do {
                _ = try await promise.wait()
                return false
            } catch {
                return true
            }
        }
        let staying = Task { try await promise.wait() }
        let patient = Task { await promise.value }
        #expect(await eventually { promise.waiterCount == 3 })
        leaving.cancel()
        #expect(await leaving.value)
        #expect(promise.waiterCount == 2)
        #expect(promise.current == nil)
        #expect(promise.fulfill(9))
        #expect(try await staying.value == 9)
        #expect(await patient.value == 9)
        #expect(await promise.value == 9)
    }

    @Test("a task cancelled before it waits leaves without registering; value (not wait) waits through cancellation")
    func cancelledBeforeWaiting() async throws {
        let promise = Promise<Int>()
        let started = Promise<Void>()
        let go = Promise<Void>()
        let outcomes = Task { () -> (threw: Bool, value: Int) in
            started.fulfill(())
            await go.value  // the task is cancelled by now
            let threw: Bool
            do {
                _ = try await promise.wait()
                threw = false
            } catch {
                threw = true
            }
            return (threw, await promise.value)
        }
        await started.value
        outcomes.cancel()
        go.fulfill(())
        #expect(await eventually { promise.waiterCount == 1 })  // the `value` wait, not the `wait()`
        #expect(promise.fulfill(5))
        let (threw, value) = await outcomes.value
        #expect(threw)
        #expect(value == 5)
    }

    @Test("1,000 values set from a plain pthread while a task waits for each, both orders racing: each waiter gets its own value")
    func fulfilledFromPthread() async throws {
        let promises = (0..<1000).map { _ in Promise<Int>() }
        let thread = try FulfillingThread.start { for (index, promise) in promises.enumerated() { promise.fulfill(index) } }
        var received: [Int] = []
        for (index, promise) in promises.enumerated() {
            received.append(index.isMultiple(of: 2) ? await promise.value : try await promise.wait())
        }
        thread.join()
        #expect(received == Array(0..<1000))
        #expect(promises.allSatisfy { $0.waiterCount == 0 })
    }
}

/// A thread that Swift's concurrency runtime knows nothing of, as the transfer engine's and the
/// pressure monitor's are.
private struct FulfillingThread {
    private final class Body {
        let work: @Sendable () -> Void
        init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    }

    struct StartError: Error { let code: Int32 }

    let handle: pthread_t

    static func start(_ work: @escaping @Sendable () -> Void) throws(StartError) -> FulfillingThread {
        let context = Unmanaged.passRetained(Body(work)).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { context in
            Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().work()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw StartError(code: result)
        }
        return FulfillingThread(handle: handle)
    }

    func join() { pthread_join(handle, nil) }
}

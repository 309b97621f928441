import ImgdCore
import ImgdTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Retrying interrupted system calls", .offThePool)
struct RetryingOnInterruptTests {
    @Test("a call failing with EINTR is made again until it answers")
    func retriesInterrupts() {
        var calls = 0
        let result = retryingOnInterrupt { () -> Int in
            calls += 1
            guard calls == 3 else {
                errno = EINTR
                return -1
            }
            return 42
        }
        #expect(result == 42)
        #expect(calls == 3)
    }

    @Test("any other failure, and 0 (end of file), is returned at once with its errno")
    func otherResults() {
        var calls = 0
        let failed = retryingOnInterrupt { () -> Int32 in
            calls += 1
            errno = EBADF
            return -1
        }
        #expect(failed == -1 && errno == EBADF && calls == 1)

        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        close(pipeEnds[1])
        var byte: UInt8 = 0
        #expect(retryingOnInterrupt { read(pipeEnds[0], &byte, 1) } == 0)
        close(pipeEnds[0])
        // Not the closed end's number: a test running beside this one may have been given it
        // already (a new descriptor takes the lowest free number). -1 is never a descriptor.
        #expect(retryingOnInterrupt { read(-1, &byte, 1) } == -1 && errno == EBADF)
    }
}

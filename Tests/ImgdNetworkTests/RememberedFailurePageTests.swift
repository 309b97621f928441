import ImgdTestSupport
import Testing

@testable import ImgdNetwork

/// Paging the failure memory: in URL order, after a cursor, at most a limit, with whether more
/// follow; walking the pages gives every failure once, whatever the input order.
@Suite("Remembered failures, a page at a time", .timeLimit(.minutes(5)), .offThePool)
struct RememberedFailurePageTests {
    static func failures(_ count: Int) -> [(url: String, error: DownloadError)] {
        // A scrambled order: the page must not depend on the dictionary's.
        (0..<count).map { index in
            let number = String((index * 7919) % count)
            let padded = String(repeating: "0", count: 4 - number.count) + number
            return (url: "http://h/\(padded)", error: DownloadError.http(status: 404, retryAfter: nil))
        }
    }

    @Test("walking pages of 7 through 50 failures: each once, in order; only the last says no more")
    func walk() {
        let all = Self.failures(50)
        var seen: [String] = []
        var after: String?
        var pages = 0
        while true {
            let page = RememberedFailurePage(of: all, after: after, limit: 7)
            seen += page.failures.map(\.url)
            pages += 1
            guard page.hasMore else { break }
            #expect(page.failures.count == 7)
            after = page.failures.last?.url
        }
        #expect(pages == 8)
        #expect(seen == all.map(\.url).sorted())
    }

    @Test("exactly a page: no more; an empty memory or a cursor past the end: an empty last page")
    func edges() {
        let ten = Self.failures(10)
        let whole = RememberedFailurePage(of: ten, after: nil, limit: 10)
        #expect(whole.failures.count == 10 && !whole.hasMore)
        let shortOne = RememberedFailurePage(of: ten, after: nil, limit: 9)
        #expect(shortOne.failures.count == 9 && shortOne.hasMore)
        let none = RememberedFailurePage(of: [], after: nil, limit: 5)
        #expect(none.failures.isEmpty && !none.hasMore)
        let past = RememberedFailurePage(of: ten, after: "http://h/9999", limit: 5)
        #expect(past.failures.isEmpty && !past.hasMore)
    }
}

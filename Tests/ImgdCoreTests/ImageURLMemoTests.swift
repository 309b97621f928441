import ImgdCore
import Testing

/// ``ImageURLMemo``: what it answers is what parsing answers, errors are never kept, and it
/// never keeps more than its capacity.
@Suite("URLs parsed once per text: the same answers as parsing, bounded")
struct ImageURLMemoTests {
    @Test("a remembered URL is the URL parsing gives, the first time and after")
    func sameAsParsing() throws {
        let memo = ImageURLMemo()
        for text in ["HTTP://Example.COM:80/a.png#frag", "https://example.com:443/b?q=1", "http://[::1]:8080/c"] {
            let parsed = try ImageURL(text)
            #expect(try memo.url(text) == parsed)
            #expect(try memo.url(text) == parsed)
        }
        #expect(memo.count == 3)
    }

    @Test("a text that is not a URL throws parsing's error every time and is not kept")
    func errorsAreNotKept() {
        let memo = ImageURLMemo()
        for text in ["ftp://example.com/a.png", "", "http://exa mple.com/"] {
            var expected: ImageURLError?
            do { _ = try ImageURL(text) } catch { expected = error }
            for _ in 0..<2 {
                #expect(throws: expected!) { try memo.url(text) }
            }
        }
        #expect(memo.count == 0)
    }

    @Test("a text over the longest kept is parsed, answered the same, and not kept: 4,096 URLs of 8 KiB hold nothing")
    func longTextsAreNotKept() throws {
        let memo = ImageURLMemo()
        let atBound = "http://example.com/" + String(repeating: "a", count: ImageURLMemo.longestKept - 19)
        let overBound = atBound + "b"
        #expect(atBound.utf8.count == ImageURLMemo.longestKept)
        #expect(try memo.url(atBound) == ImageURL(atBound))
        #expect(memo.count == 1)
        for index in 0..<100 {
            let text = overBound + "\(index)" + String(repeating: "c", count: 7000)
            #expect(try memo.url(text) == ImageURL(text))
        }
        #expect(memo.count == 1)
    }

    @Test("it keeps at most its capacity; past it, it starts again and answers the same")
    func bounded() throws {
        let memo = ImageURLMemo(capacity: 8)
        for round in 0..<3 {
            for index in 0..<20 {
                let text = "http://example.com/\(index).png"
                #expect(try memo.url(text) == ImageURL(text), "round \(round)")
                #expect(memo.count <= 8)
            }
        }
    }
}

import ImgdTestSupport
import Testing

@testable import ImgctlCLI

@Suite("Spool names", .offThePool)
struct SpoolWriterTests {
    @Test("names the daemon would skip are made acceptable")
    func spoolNames() {
        #expect(SpoolWriter.spoolName(for: "/a/b/links.txt") == "links.txt")
        #expect(SpoolWriter.spoolName(for: "..hidden.json") == "hidden.json")
        #expect(SpoolWriter.spoolName(for: "list.tmp") == "list.tmp.txt")
        #expect(SpoolWriter.spoolName(for: "list.part") == "list.part.txt")
        #expect(SpoolWriter.spoolName(for: "...") == "list.txt")
        #expect(SpoolWriter.spoolName(for: "-") == "stdin.txt")
    }

    @Test("suffixes go before the extension")
    func suffixes() {
        #expect(SpoolWriter.withSuffix("links.txt", 0) == "links.txt")
        #expect(SpoolWriter.withSuffix("links.txt", 2) == "links-2.txt")
        #expect(SpoolWriter.withSuffix("a.b.json", 1) == "a.b-1.json")
        #expect(SpoolWriter.withSuffix("README", 3) == "README-3")
    }

    @Test("the first free name is taken, looking in the spool's folders and the known lists")
    func uniqueName() {
        var writer = SpoolWriter(spool: "/s")
        let present: Set<String> = ["/s/a.txt", "/s/.claimed/a-1.txt", "/s/failed/a-3.txt"]
        writer.exists = { present.contains($0) }
        writer.knownNames = ["a-2.txt"]
        #expect(writer.uniqueName("a.txt").name == "a-4.txt")
        #expect(writer.uniqueName("b.txt").name == "b.txt")
    }
}

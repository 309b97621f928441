import ImgdTestSupport
import Testing

@testable import ImgdDaemon

/// Names in the spool are bytes; the files the spool makes from them fit NAME_MAX.
@Suite("Spool entry names", .offThePool)
struct SpoolEntryNameTests {
    @Test("display: UTF-8 as it is (control characters too), anything else escaped")
    func display() {
        #expect(SpoolEntryName("a b\n.txt").display == "a b\n.txt")
        #expect(SpoolEntryName(bytes: Array("bad".utf8) + [0xFF] + Array(".txt".utf8)).display == #"bad\xff.txt"#)
    }

    @Test("the writers' own names and the spool's folders are ignored, by their bytes")
    func ignored() {
        for name in [".x.txt", "a.txt.tmp", "a.part", "done", "failed", ".claimed"] {
            #expect(SpoolEntryName(name).isIgnored, "\(name)")
        }
        for name in ["a.txt", "done.txt", "tmp", "failed2"] {
            #expect(!SpoolEntryName(name).isIgnored, "\(name)")
        }
        #expect(!SpoolEntryName(bytes: [0xFF, 0x2E, 0x74, 0x78, 0x74]).isIgnored)
    }

    @Test("file names: short ones unchanged; long ones cut on a character, with a hash that tells them apart")
    func fileNames() {
        let short = String(repeating: "a", count: SpoolEntryName.fileNameLimit)
        #expect(SpoolEntryName.fileName(for: short) == short)
        let long1 = String(repeating: "a", count: 250) + "1.txt"
        let long2 = String(repeating: "a", count: 250) + "2.txt"
        let name1 = SpoolEntryName.fileName(for: long1), name2 = SpoolEntryName.fileName(for: long2)
        #expect(name1 != name2)
        #expect(name1.utf8.count == SpoolEntryName.fileNameLimit)
        #expect(name1 == SpoolEntryName.fileName(for: long1))  // stable
        // With everything the spool adds, still within NAME_MAX.
        #expect(("18446744073709551615." + name1).utf8.count <= 255)
        #expect((SpoolFolders.numbered(name1, 999) + ".report.json").utf8.count <= 255)
        // A cut never splits a character: é is two bytes.
        let accented = String(repeating: "é", count: 200)
        let cut = SpoolEntryName.fileName(for: accented)
        #expect(cut.utf8.count <= SpoolEntryName.fileNameLimit)
        #expect(cut.hasPrefix(String(repeating: "é", count: 105)))
        #expect(String(validating: Array(cut.utf8), as: UTF8.self) != nil)
    }
}

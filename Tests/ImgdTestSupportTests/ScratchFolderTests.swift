import Foundation
import ImgdTestSupport
import Testing

@Suite("ScratchFolder: one fresh folder per test")
struct ScratchFolderTests {
    @Test("each is new, empty, named by its prefix, reachable by other users; remove() takes it all")
    func lifecycle() throws {
        let one = try ScratchFolder("imgd-scratch-test")
        let two = try ScratchFolder("imgd-scratch-test")
        defer { two.remove() }
        #expect(one.path != two.path)
        #expect(URL(fileURLWithPath: one.path).lastPathComponent.hasPrefix("imgd-scratch-test-"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: one.path).isEmpty)
        let mode = try FileManager.default.attributesOfItem(atPath: one.path)[.posixPermissions] as? Int ?? 0
        #expect(mode & 0o005 == 0o005, "mode \(String(mode, radix: 8)): a second user cannot reach into it")

        let written = try one.write("list.txt", "a\n")
        #expect(written == one.path("list.txt"))
        #expect(try String(contentsOfFile: written, encoding: .utf8) == "a\n")
        try FileManager.default.createDirectory(atPath: one.path("cache/ab"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: one.path("cache/tmp"), withIntermediateDirectories: true)
        try one.write("cache/ab/abcd", "image")
        try one.write("cache/tmp/part", "partial")
        try one.write("cache/index.sqlite", "")
        #expect(one.files(under: "cache") == ["ab/abcd"])

        one.remove()
        #expect(!FileManager.default.fileExists(atPath: one.path))
        one.remove()  // gone already: nothing
    }
}

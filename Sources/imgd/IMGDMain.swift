import ImgdCLI

/// The `imgd` executable: everything lives in ImgdCLI, so this stays one line.
@main
struct IMGDMain {
    static func main() async {
        await IMGDCommand.runAndExit()
    }
}

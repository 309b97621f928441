/// imgd's version, shown by `--version`, sent in the User-Agent, and (later) in `hello`.
public enum ImgdVersion {
    public static let string = "0.2.0"
}

/// ImgdBase's types (sizes, text escaping, base64, socket addresses, the version) were
/// ImgdCore's until `imgctl` was given a lighter graph; every target above ImgdCore still sees
/// them through `import ImgdCore`.
@_exported import ImgdBase

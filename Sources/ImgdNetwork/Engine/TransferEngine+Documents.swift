import ImgdCore

extension CachedImage {
    /// A document that arrived whole (``Job/documentLimit``): answered with its bytes, not
    /// published. Its reservation held nothing (a document takes no room in the cache).
    init(document body: ArrivedBody) {
        body.reservation.release()
        self.init(
            url: body.url, key: body.key, path: "", bytes: body.bytes, source: .network, download: nil, entry: nil,
            document: body.buffer)
    }
}

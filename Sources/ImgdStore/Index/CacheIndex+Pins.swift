import ImgdCore

extension CacheIndex {
    /// Pins each key until its time (milliseconds since 1970), as ``pin(_:until:)`` does one,
    /// in one transaction: one commit for a batch (`add`'s pins as its URLs arrive). A later pin
    /// never shortens an earlier one; a key without a row is left alone.
    public func pin(_ pins: [(key: CacheKey, until: Int)]) throws(SQLiteError) {
        guard !pins.isEmpty else { return }
        try writer.withLock { connection throws(SQLiteError) in
            try connection.transaction { () throws(SQLiteError) in
                let statement = try connection.statement(
                    "UPDATE entries SET pinned_until = max(coalesce(pinned_until, 0), ?2) WHERE key = ?1")
                defer { statement.reset() }
                for pin in pins {
                    statement.reset()
                    pin.key.digest.bytes.withUnsafeBytes { statement.bind(1, bytes: $0) }
                    statement.bind(2, pin.until)
                    try statement.step()
                }
            }
        }
    }
}

import CSQLite

/// SQLite refused something: the result code, SQLite's message and the statement, so the cause
/// (a full disk, a locked or corrupt index file) can be seen and fixed.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite's extended result code.
    public let code: Int32
    /// SQLite's message.
    public let message: String
    /// The statement or operation that failed.
    public let context: String

    public init(code: Int32, message: String, context: String) {
        self.code = code
        self.message = message
        self.context = context
    }

    public var description: String { "SQLite error \(code) (\(message)) in \(context)" }

    /// True for SQLITE_FULL: the disk holding the index is full.
    public var isDiskFull: Bool { code & 0xFF == SQLITE_FULL }
}

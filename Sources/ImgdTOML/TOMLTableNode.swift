/// The document's tables while it is read, with how each was made, which decides what may
/// still be added to it (TOML 1.0's "defining a table more than once is invalid" rules).
///
/// Reference types because a header reaches into a table made many lines earlier; they never
/// leave the parser (``freeze()`` turns them into ``TOMLTable`` values).
final class TOMLTableNode {
    /// How a table came to be.
    enum Origin {
        /// Made as the parent of a longer header (`[a.b]` makes `a`); `[a]` may still define it.
        case implicit
        /// Defined by a `[header]` (or the root, or an element of an array of tables).
        case header
        /// Made by a dotted key (`a.b = 1` makes `a`); more dotted keys may add to it.
        case dotted
    }

    /// What one key of a table holds.
    enum Slot {
        case value(TOMLValue, line: Int)
        case table(TOMLTableNode)
        /// An array of tables (`[[name]]`), which later headers may append to.
        case tables(TOMLTableArray)
    }

    var origin: Origin
    var line: Int
    private var order: [String] = []
    private var slots: [String: Slot] = [:]

    init(origin: Origin, line: Int) {
        self.origin = origin
        self.line = line
    }

    subscript(key: String) -> Slot? { slots[key] }

    func insert(_ key: String, _ slot: Slot) {
        precondition(slots[key] == nil, "\(key) inserted twice")
        order.append(key)
        slots[key] = slot
    }

    /// The table as a value, keys in the order they were defined.
    func freeze() -> TOMLTable {
        TOMLTable(entries: order.map { key in
            switch slots[key]! {
            case .value(let value, let line): TOMLTable.Entry(key: key, value: value, line: line)
            case .table(let table): TOMLTable.Entry(key: key, value: .table(table.freeze()), line: table.line)
            case .tables(let array):
                TOMLTable.Entry(key: key, value: .array(array.elements.map { .table($0.freeze()) }), line: array.line)
            }
        })
    }

    // MARK: - The rules

    /// `[path]`: the table to fill from the next line on.
    func defineTable(_ path: [String], line: Int) throws(TOMLError) -> TOMLTableNode {
        let parent = try parentForHeader(path, line: line)
        let key = path.last!
        let name = Self.show(path)
        switch parent[key] {
        case nil:
            let table = TOMLTableNode(origin: .header, line: line)
            parent.insert(key, .table(table))
            return table
        case .table(let table) where table.origin == .implicit:
            table.origin = .header
            table.line = line
            return table
        case .table(let table) where table.origin == .dotted:
            throw TOMLError(line: line, reason: "[\(name)] was already made by a dotted key on line \(table.line)")
        case .table(let table):
            throw TOMLError(line: line, reason: "[\(name)] is defined twice (first on line \(table.line))")
        case .tables(let array):
            throw TOMLError(line: line, reason: "[\(name)] is an array of tables (line \(array.line)): use [[\(name)]]")
        case .value(let value, let first):
            throw TOMLError(line: line, reason: "\(name) is already \(value.typeName) (line \(first))")
        }
    }

    /// `[[path]]`: a new element of the array of tables, to fill from the next line on.
    func appendTable(_ path: [String], line: Int) throws(TOMLError) -> TOMLTableNode {
        let parent = try parentForHeader(path, line: line)
        let key = path.last!
        let name = Self.show(path)
        let element = TOMLTableNode(origin: .header, line: line)
        switch parent[key] {
        case nil:
            let array = TOMLTableArray(line: line)
            array.elements.append(element)
            parent.insert(key, .tables(array))
        case .tables(let array):
            array.elements.append(element)
        case .table(let table):
            throw TOMLError(line: line, reason: "[[\(name)]]: \(name) is already a table (line \(table.line))")
        case .value(let value, let first):
            throw TOMLError(line: line, reason: "[[\(name)]]: \(name) is already \(value.typeName) (line \(first)), which cannot be extended")
        }
        return element
    }

    /// `path = value` in this table.
    func setValue(_ value: TOMLValue, at path: [String], line: Int) throws(TOMLError) {
        var table = self
        for (index, key) in path.dropLast().enumerated() {
            let name = Self.show(path[...index])
            switch table[key] {
            case nil:
                let made = TOMLTableNode(origin: .dotted, line: line)
                table.insert(key, .table(made))
                table = made
            case .table(let next) where next.origin == .dotted:
                table = next
            case .table(let next):
                throw TOMLError(line: line, reason: "\(name) is a table defined by a header (line \(next.line)): dotted keys cannot add to it")
            case .tables(let array):
                throw TOMLError(line: line, reason: "\(name) is an array of tables (line \(array.line)): dotted keys cannot add to it")
            case .value(let value, let first):
                throw TOMLError(line: line, reason: "\(name) is already \(value.typeName) (line \(first)), which cannot be extended")
            }
        }
        let key = path.last!
        if let existing = table[key] {
            let first = switch existing {
            case .value(_, let line): line
            case .table(let table): table.line
            case .tables(let array): array.line
            }
            throw TOMLError(line: line, reason: "\(Self.show(path)) is defined twice (first on line \(first))")
        }
        table.insert(key, .value(value, line: line))
    }

    /// The table a header's last key goes into, making the tables on the way: a header passes
    /// through tables of any kind and into the last element of an array of tables, never into
    /// a value (an inline table included: it is complete where it is written).
    private func parentForHeader(_ path: [String], line: Int) throws(TOMLError) -> TOMLTableNode {
        var table = self
        for (index, key) in path.dropLast().enumerated() {
            switch table[key] {
            case nil:
                let made = TOMLTableNode(origin: .implicit, line: line)
                table.insert(key, .table(made))
                table = made
            case .table(let next):
                table = next
            case .tables(let array):
                table = array.elements.last!
            case .value(let value, let first):
                throw TOMLError(
                    line: line,
                    reason: "\(Self.show(path[...index])) is already \(value.typeName) (line \(first)), which cannot be extended")
            }
        }
        return table
    }

    /// A key path as written in a header: `a."b.c"`.
    static func show<Keys: Collection<String>>(_ path: Keys) -> String {
        path.map { key in
            key.utf8.allSatisfy(TOMLParser.isBareKeyByte) && !key.isEmpty ? key : "\"\(key)\""
        }.joined(separator: ".")
    }
}

/// An array of tables while it is read: later `[[name]]` headers append to it.
final class TOMLTableArray {
    let line: Int
    var elements: [TOMLTableNode] = []

    init(line: Int) {
        self.line = line
    }
}

/// Values by key in recency order, with O(1) lookup, insert, touch and removal: a dictionary
/// from key to slot, and a doubly linked list threaded through an array of slots by index.
///
/// Indices instead of class nodes keep it a few allocations (plus the values) and free of
/// reference counting; freed slots are reused before the array grows. The links live in arrays
/// of their own, beside the nodes: moving a node to the newest end (every hit) then touches
/// integers only, never copies a node (its key and value, with their reference counts).
/// Not thread-safe: its owner guards it (``MemoryCache`` holds it inside its mutex).
struct LRUList<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var cost: Int
    }

    private var slots: [Node?] = []
    /// By slot: the slot of the next more recent node, or -1 at the newest end.
    private var newer: [Int] = []
    /// By slot: the slot of the next less recent node, or -1 at the oldest end.
    private var older: [Int] = []
    private var freeSlots: [Int] = []
    private var slotOfKey: [Key: Int] = [:]
    private var newest = -1
    private var oldest = -1

    /// The sum of the costs of the stored values.
    private(set) var totalCost = 0

    /// The number of stored values.
    var count: Int { slotOfKey.count }

    /// The value for `key`, which becomes the most recent; nil when absent.
    /// Whether `key` is held, without making it the most recently used.
    func contains(_ key: Key) -> Bool { slotOfKey[key] != nil }

    mutating func touch(_ key: Key) -> Value? {
        guard let slot = slotOfKey[key] else { return nil }
        unlink(slot)
        linkAsNewest(slot)
        return slots[slot]!.value
    }

    /// Stores `value` as the most recent, replacing any value for `key`.
    mutating func set(_ value: Value, cost: Int, for key: Key) {
        if let slot = slotOfKey[key] {
            totalCost += cost - slots[slot]!.cost
            slots[slot]!.value = value
            slots[slot]!.cost = cost
            unlink(slot)
            linkAsNewest(slot)
            return
        }
        let node = Node(key: key, value: value, cost: cost)
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = node
        } else {
            slot = slots.count
            slots.append(node)
            newer.append(-1)
            older.append(-1)
        }
        slotOfKey[key] = slot
        totalCost += cost
        linkAsNewest(slot)
    }

    /// Removes the value for `key`; returns whether there was one.
    @discardableResult
    mutating func remove(_ key: Key) -> Bool {
        guard let slot = slotOfKey.removeValue(forKey: key) else { return false }
        free(slot)
        return true
    }

    /// Removes the least recent value; returns false when empty.
    @discardableResult
    mutating func removeOldest() -> Bool {
        guard oldest >= 0 else { return false }
        slotOfKey[slots[oldest]!.key] = nil
        free(oldest)
        return true
    }

    /// Removes every value whose cost is above `cost`. O(n): for rare limit changes only.
    mutating func removeAll(costlierThan cost: Int) {
        var slot = oldest
        while slot >= 0 {
            let node = slots[slot]!
            let next = newer[slot]
            if node.cost > cost {
                slotOfKey[node.key] = nil
                free(slot)
            }
            slot = next
        }
    }

    /// Removes everything and gives the storage back to the allocator: a purge is meant to
    /// lower the process's memory, not to keep capacity for later.
    mutating func removeAll() {
        slots = []
        newer = []
        older = []
        freeSlots = []
        slotOfKey = [:]
        newest = -1
        oldest = -1
        totalCost = 0
    }

    /// Keys and costs from the most recent to the least recent, walking the links: for tests
    /// that check the links, the dictionary and ``totalCost`` agree.
    func keysByRecency() -> [(key: Key, cost: Int)] {
        var result: [(key: Key, cost: Int)] = []
        var slot = newest
        while slot >= 0 {
            let node = slots[slot]!
            precondition(slotOfKey[node.key] == slot, "LRU list and its dictionary disagree")
            result.append((node.key, node.cost))
            slot = older[slot]
        }
        return result
    }

    private mutating func free(_ slot: Int) {
        unlink(slot)
        totalCost -= slots[slot]!.cost
        slots[slot] = nil
        freeSlots.append(slot)
    }

    private mutating func unlink(_ slot: Int) {
        let next = newer[slot]
        let previous = older[slot]
        if next >= 0 { older[next] = previous } else { newest = previous }
        if previous >= 0 { newer[previous] = next } else { oldest = next }
        newer[slot] = -1
        older[slot] = -1
    }

    private mutating func linkAsNewest(_ slot: Int) {
        older[slot] = newest
        newer[slot] = -1
        if newest >= 0 { newer[newest] = slot } else { oldest = slot }
        newest = slot
    }
}

extension Array {
    /// A copy in storage of its own, which no later append to `self` can touch.
    ///
    /// What a lock guards is handed out this way. A plain copy shares its storage, so the next
    /// in-place append (once the copy's reader has let go) is ordered after the reader's last
    /// read only by the storage's reference count, whose atomics are in the uninstrumented Swift
    /// runtime: ThreadSanitizer would report a race that is not one.
    func ownedCopy() -> [Element] {
        map { $0 }
    }
}

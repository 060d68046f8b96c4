/// A map whose keys come from outside (push-service origins, host names): at most `capacity`
/// entries, the least recently used dropped beyond it, and entries not used for `idleLimit`
/// dropped whenever the map is touched. Each owner keeps one behind its lock, reports `count`
/// on a gauge, and passes in its clock's milliseconds so the rules are testable.
///
/// Entries are kept in a doubly linked recency list threaded through the dictionary, so every
/// operation is O(1) apart from the idle entries it drops.
public struct BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry: Sendable {
        var value: Value
        var lastUsed: Int64
        /// Towards the least recently used end.
        var older: Key?
        /// Towards the most recently used end.
        var newer: Key?
    }

    public let capacity: Int
    /// Milliseconds an entry may go unused before it is dropped.
    public let idleLimit: Int64
    private var entries: [Key: Entry] = [:]
    private var newest: Key?
    private var oldest: Key?

    /// - Parameters:
    ///   - capacity: the most entries kept (at least 1).
    ///   - idleLimit: how long an entry may go unused.
    public init(capacity: Int, idleLimit: Duration) {
        self.capacity = max(1, capacity)
        self.idleLimit = max(0, idleLimit.milliseconds)
    }

    public var count: Int { entries.count }

    /// The value for `key`, marked as used at `now`; nil when absent or idle for too long.
    public mutating func value(for key: Key, now: Int64) -> Value? {
        evictIdle(now: now)
        guard var entry = entries[key] else { return nil }
        unlink(key, entry)
        entry.lastUsed = now
        link(key, &entry)
        entries[key] = entry
        return entry.value
    }

    /// Stores `value` for `key` as used at `now`; drops idle entries, then the least recently used beyond the capacity.
    public mutating func set(_ value: Value, for key: Key, now: Int64) {
        evictIdle(now: now)
        if let existing = entries[key] { unlink(key, existing) }
        var entry = Entry(value: value, lastUsed: now)
        link(key, &entry)
        entries[key] = entry
        while entries.count > capacity, let victim = oldest { removeValue(for: victim) }
    }

    @discardableResult
    public mutating func removeValue(for key: Key) -> Value? {
        guard let entry = entries.removeValue(forKey: key) else { return nil }
        unlink(key, entry)
        return entry.value
    }

    /// Drops every entry unused since `now - idleLimit` (they sit at the old end of the recency list).
    public mutating func evictIdle(now: Int64) {
        let horizon = now.subtracting(saturating: idleLimit)
        while let key = oldest, let entry = entries[key], entry.lastUsed <= horizon { removeValue(for: key) }
    }

    /// Makes `key` the newest; `entry` is not yet stored under it.
    private mutating func link(_ key: Key, _ entry: inout Entry) {
        entry.older = newest
        entry.newer = nil
        if let previous = newest { entries[previous]?.newer = key } else { oldest = key }
        newest = key
    }

    /// Takes `key` out of the recency list; `entry` is its current (stored) entry.
    private mutating func unlink(_ key: Key, _ entry: Entry) {
        if let older = entry.older { entries[older]?.newer = entry.newer } else { oldest = entry.newer }
        if let newer = entry.newer { entries[newer]?.older = entry.older } else { newest = entry.older }
    }
}

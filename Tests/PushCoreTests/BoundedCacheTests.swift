import PushCore
import Testing

@Suite("A bounded cache keeps a size limit and forgets idle entries")
struct BoundedCacheTests {
    @Test("beyond its capacity the least recently used entry is dropped, not the newest")
    func leastRecentlyUsedIsEvicted() {
        var cache = BoundedCache<String, Int>(capacity: 3, idleLimit: .seconds(60))
        cache.set(1, for: "a", now: 0)
        cache.set(2, for: "b", now: 1)
        cache.set(3, for: "c", now: 2)
        #expect(cache.value(for: "a", now: 3) == 1)
        cache.set(4, for: "d", now: 4)
        #expect(cache.count == 3)
        #expect(cache.value(for: "b", now: 5) == nil)
        #expect(cache.value(for: "a", now: 5) == 1)
        #expect(cache.value(for: "c", now: 5) == 3)
        #expect(cache.value(for: "d", now: 5) == 4)
    }

    @Test("an entry unused for the idle limit is gone, and touching the cache drops it from the count")
    func idleEntriesAreDropped() {
        var cache = BoundedCache<String, Int>(capacity: 10, idleLimit: .seconds(10))
        cache.set(1, for: "old", now: 0)
        cache.set(2, for: "used", now: 0)
        #expect(cache.value(for: "used", now: 9_000) == 2)
        #expect(cache.value(for: "old", now: 10_000) == nil)
        #expect(cache.count == 1)
        cache.evictIdle(now: 19_000)
        #expect(cache.count == 0)
    }

    @Test("replacing a value keeps one entry and makes it the newest")
    func replacingKeepsOneEntry() {
        var cache = BoundedCache<String, Int>(capacity: 2, idleLimit: .seconds(60))
        cache.set(1, for: "a", now: 0)
        cache.set(2, for: "b", now: 1)
        cache.set(3, for: "a", now: 2)
        cache.set(4, for: "c", now: 3)
        #expect(cache.count == 2)
        #expect(cache.value(for: "a", now: 4) == 3)
        #expect(cache.value(for: "b", now: 4) == nil)
        #expect(cache.removeValue(for: "a") == 3)
        #expect(cache.count == 1)
    }

    @Test("100 000 distinct keys leave at most the capacity, and the survivors are the latest")
    func manyDistinctKeysStayBounded() {
        var cache = BoundedCache<Int, Int>(capacity: 1_000, idleLimit: .seconds(3_600))
        for key in 0..<100_000 { cache.set(key, for: key, now: Int64(key)) }
        #expect(cache.count == 1_000)
        #expect(cache.value(for: 98_999, now: 100_000) == nil)
        #expect(cache.value(for: 99_000, now: 100_000) == 99_000)
        #expect(cache.value(for: 99_999, now: 100_000) == 99_999)
    }
}

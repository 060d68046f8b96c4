import Testing
@testable import PushCore

@Suite("Lane queue: urgent first, each lane oldest first")
struct LaneQueueTests {
    @Test("urgent elements leave before normal ones; within a lane the oldest leaves first")
    func order() {
        var queue = LaneQueue<Int>()
        queue.append(1, lane: .normal)
        queue.append(2, lane: .urgent)
        queue.append(3, lane: .normal)
        queue.append(4, lane: .urgent)
        #expect(queue.hasUrgent)
        #expect((0..<4).compactMap { _ in queue.popFirst() } == [2, 4, 1, 3])
        #expect(queue.isEmpty)
        #expect(queue.popFirst() == nil)
    }

    @Test("with normal elements not allowed, only urgent ones come out")
    func normalHeldBack() {
        var queue = LaneQueue<Int>()
        queue.append(1, lane: .normal)
        #expect(queue.popFirst(normalAllowed: false) == nil)
        queue.append(2, lane: .urgent)
        #expect(queue.popFirst(normalAllowed: false) == 2)
        #expect(queue.popFirst() == 1)
    }

    @Test("a cancelled element is taken out wherever it waits; the rest keep their order")
    func remove() {
        var queue = LaneQueue<Int>()
        for value in 1...5 { queue.append(value, lane: value.isMultiple(of: 2) ? .urgent : .normal) }
        #expect(queue.remove { $0 == 4 } == 4)
        #expect(queue.remove { $0 == 3 } == 3)
        #expect(queue.remove { $0 == 9 } == nil)
        #expect(queue.removeAll() == [2, 1, 5])
        #expect(queue.isEmpty)
    }

    @Test("a long queue drained while it is fed keeps its order across compactions")
    func longQueue() {
        var queue = LaneQueue<Int>()
        var next = 0, expected = 0
        for _ in 0..<10 {
            for _ in 0..<3000 {
                queue.append(next, lane: .normal)
                next += 1
            }
            for _ in 0..<2500 {
                #expect(queue.popFirst() == expected)
                expected += 1
            }
        }
        while let value = queue.popFirst() {
            #expect(value == expected)
            expected += 1
        }
        #expect(expected == next)
    }

    @Test("an element is released as soon as it is popped, even while thousands wait behind it")
    func poppedElementsAreReleased() {
        final class Waiter {}
        var queue = FIFOQueue<Waiter>()
        weak var first: Waiter?
        do {
            let waiter = Waiter()
            first = waiter
            queue.append(waiter)
        }
        for _ in 0..<5_000 { queue.append(Waiter()) }
        #expect(first != nil)
        _ = queue.popFirst()
        #expect(first == nil, "the queue still held a popped element")
        #expect(queue.count == 5_000)
    }
}

@Suite("Lane capacity: normal work leaves a part to urgent work")
struct LaneCapacityTests {
    @Test("by default a tenth of the capacity, at least one, is only urgent work's")
    func defaultReserve() {
        #expect(LaneCapacity(total: 400).normal == 360)
        #expect(LaneCapacity(total: 400).limit(for: .urgent) == 400)
        #expect(LaneCapacity(total: 5).normal == 4)
        #expect(LaneCapacity(total: 15).normal == 14)
    }

    @Test("normal work always gets at least one, whatever is reserved")
    func normalNeverStarves() {
        #expect(LaneCapacity(total: 1).normal == 1)
        #expect(LaneCapacity(total: 10, reservedForUrgent: 10).normal == 1)
        #expect(LaneCapacity(total: 0).total == 1)
    }

    @Test("a reserve set explicitly replaces the default; a negative one reserves nothing")
    func explicitReserve() {
        #expect(LaneCapacity(total: 100, reservedForUrgent: 30).normal == 70)
        #expect(LaneCapacity(total: 100, reservedForUrgent: 0).normal == 100)
        #expect(LaneCapacity(total: 100, reservedForUrgent: -5).normal == 100)
    }

    @Test("room: urgent work up to the whole, normal work up to its part")
    func room() {
        let capacity = LaneCapacity(total: 10)
        #expect(capacity.hasRoom(for: .normal, used: 8))
        #expect(!capacity.hasRoom(for: .normal, used: 9))
        #expect(capacity.hasRoom(for: .urgent, used: 9))
        #expect(!capacity.hasRoom(for: .urgent, used: 10))
    }
}

import Dispatch
import PushCore
import Testing

@Suite("Locked state")
struct LockedTests {
    @Test("threads changing the state at once each see it alone: no update is lost")
    func updatesFromManyThreadsAreExclusive() {
        let counter = Locked((count: 0, maximumInside: 0, inside: 0))
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20_000 {
                counter.withLock { state in
                    state.inside += 1
                    state.maximumInside = max(state.maximumInside, state.inside)
                    state.count += 1
                    state.inside -= 1
                }
            }
        }
        let final = counter.withLock { $0 }
        #expect(final.count == 160_000)
        #expect(final.maximumInside == 1)
    }

    @Test("an error thrown inside leaves the lock free and the changes made before it kept")
    func aThrowReleasesTheLock() {
        struct Refused: Error {}
        let state = Locked([Int]())
        #expect(throws: Refused.self) {
            try state.withLock { (values: inout [Int]) throws(Refused) in
                values.append(1)
                throw Refused()
            }
        }
        // Would deadlock if the throw had kept the lock.
        #expect(state.withLock { $0 } == [1])
    }

    @Test("the state is released with the lock")
    func stateIsReleased() {
        final class Tracked: Sendable {}
        weak var tracked: Tracked?
        do {
            let object = Tracked()
            tracked = object
            let state = Locked<Tracked?>(object)
            _ = state.withLock { $0 }
        }
        #expect(tracked == nil)
    }
}

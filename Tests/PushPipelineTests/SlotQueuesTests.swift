import PushCore
import Testing

@testable import PushPipeline

/// App and endpoint slots as a value: each event's answer and the waiters it moves on, without locks or threads.
@Suite("Slot queues")
struct SlotQueuesTests {
    struct TestWaiter: SlotWaiter, Equatable {
        let id: UInt64
        let scope: DeliveryScope
        let lane: Lane
    }

    typealias Queues = SlotQueues<TestWaiter>

    static let endpoint = "https://push.example key"

    static func scope(_ app: String, endpoint: String? = SlotQueuesTests.endpoint) -> DeliveryScope {
        DeliveryScope(provider: .apns, key: app, endpoint: endpoint)
    }

    /// Asks for the slots of `app` as a new waiter; returns it and where it stands.
    static func ask(
        _ queues: inout Queues, _ app: String, lane: Lane = .normal, appLimit: Int = 10, endpoint: String? = SlotQueuesTests.endpoint
    ) -> (TestWaiter, Queues.Stage) {
        let scope = scope(app, endpoint: endpoint)
        if queues.takeBothIfFree(scope, lane: lane, appLimit: appLimit) {
            return (TestWaiter(id: 0, scope: scope, lane: lane), .granted)
        }
        let waiter = TestWaiter(id: queues.nextID(), scope: scope, lane: lane)
        return (waiter, queues.enter(waiter, appLimit: appLimit))
    }

    /// The actions as "granted <id>" and "endpoint <id>".
    static func describe(_ actions: [Queues.Action]) -> [String] {
        actions.map {
            switch $0 {
            case .granted(let waiter): "granted \(waiter.id)"
            case .waitsForEndpoint(let waiter): "endpoint \(waiter.id)"
            }
        }
    }

    @Test("an app at its limit queues the next request; a release hands the slot over, oldest first")
    func appLimitQueuesOldestFirst() {
        var queues = Queues(endpointLimit: nil)
        #expect(Self.ask(&queues, "a", appLimit: 1).1 == .granted)
        let (second, stage2) = Self.ask(&queues, "a", appLimit: 1)
        let (third, stage3) = Self.ask(&queues, "a", appLimit: 1)
        #expect(stage2 == .waitingForApp && stage3 == .waitingForApp)
        #expect(Self.describe(queues.release(Self.scope("a"))) == ["granted \(second.id)"])
        #expect(queues.running(Self.scope("a")) == 1, "the slot went over, not back")
        #expect(Self.describe(queues.release(Self.scope("a"))) == ["granted \(third.id)"])
        #expect(queues.release(Self.scope("a")).isEmpty)
        #expect(queues.trackedKeys == 0, "an app with nothing running or waiting is forgotten")
    }

    @Test("urgent requests take an app's freed slot before older normal ones")
    func urgentFirst() {
        var queues = Queues(endpointLimit: nil)
        _ = Self.ask(&queues, "a", appLimit: 1)
        let (normal, _) = Self.ask(&queues, "a", appLimit: 1)
        let (urgent, _) = Self.ask(&queues, "a", lane: .urgent, appLimit: 1)
        #expect(Self.describe(queues.release(Self.scope("a"))) == ["granted \(urgent.id)"])
        #expect(Self.describe(queues.release(Self.scope("a"))) == ["granted \(normal.id)"])
    }

    @Test("apps on one endpoint share its slots; normal requests leave the reserved one to urgent ones")
    func endpointSharedWithUrgentReserve() {
        var queues = Queues(endpointLimit: LaneCapacity(total: 3))
        #expect(Self.ask(&queues, "a").1 == .granted)
        #expect(Self.ask(&queues, "b").1 == .granted)
        let (waiting, stage) = Self.ask(&queues, "c")
        #expect(stage == .waitingForEndpoint, "two normal requests fill what normal requests may use of three slots")
        #expect(queues.running(Self.scope("c")) == 1, "a request waiting for its endpoint holds its app's slot")
        #expect(Self.ask(&queues, "d", lane: .urgent).1 == .granted, "the third slot is the urgent one's")
        #expect(queues.running(endpoint: Self.endpoint) == 3)
        #expect(Self.describe(queues.release(Self.scope("d"))).isEmpty, "freeing the urgent slot leaves normal ones at their part")
        #expect(Self.describe(queues.release(Self.scope("a"))) == ["granted \(waiting.id)"])
        #expect(Self.ask(&queues, "e", endpoint: "https://other.example").1 == .granted, "another endpoint's slots are its own")
    }

    @Test("a request parked on its app gets the app's slot first, then waits for its endpoint, told once")
    func parkedMovesOnToEndpoint() {
        var queues = Queues(endpointLimit: LaneCapacity(total: 1))
        _ = Self.ask(&queues, "a", appLimit: 1)
        let (parked, stage) = Self.ask(&queues, "a", appLimit: 1)
        #expect(stage == .waitingForApp)
        let (other, otherStage) = Self.ask(&queues, "b", appLimit: 1)
        #expect(otherStage == .waitingForEndpoint)
        // The endpoint's slot goes to b (waiting for it first); a's app slot goes to the parked one, which waits on.
        #expect(Self.describe(queues.release(Self.scope("a"))) == ["granted \(other.id)", "endpoint \(parked.id)"])
        #expect(Self.describe(queues.release(Self.scope("b"))) == ["granted \(parked.id)"])
    }

    @Test("a waiter taken out of the endpoint's queue gives its app slot to the app's next waiter")
    func removalGivesBackTheAppSlot() {
        var queues = Queues(endpointLimit: LaneCapacity(total: 1))
        _ = Self.ask(&queues, "x", appLimit: 1)
        let (waiting, _) = Self.ask(&queues, "a", appLimit: 1)
        let (next, nextStage) = Self.ask(&queues, "a", appLimit: 1)
        #expect(nextStage == .waitingForApp)
        let removed = queues.remove(waiting.id, of: waiting.scope)
        #expect(removed?.waiter == waiting)
        #expect(Self.describe(removed?.actions ?? []) == ["endpoint \(next.id)"])
        #expect(queues.remove(waiting.id, of: waiting.scope) == nil, "taken out once")
    }

    @Test("withdrawing returns only the waiters still waiting; their app slots go to others, never to one withdrawn with them")
    func withdrawing() {
        var queues = Queues(endpointLimit: LaneCapacity(total: 1))
        _ = Self.ask(&queues, "x", appLimit: 1)
        let (endpointWaiter, _) = Self.ask(&queues, "a", appLimit: 1)
        let (appWaiter, _) = Self.ask(&queues, "a", appLimit: 1)
        let (kept, _) = Self.ask(&queues, "a", appLimit: 1)
        let (withdrawn, actions) = queues.withdraw([endpointWaiter.id, appWaiter.id, 999])
        #expect(Set(withdrawn.map(\.id)) == [endpointWaiter.id, appWaiter.id])
        #expect(Self.describe(actions) == ["endpoint \(kept.id)"])
        #expect(queues.running(Self.scope("a")) == 1)
    }
}

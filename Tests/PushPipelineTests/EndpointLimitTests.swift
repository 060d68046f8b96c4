import Synchronization
import PushCore
import PushKafka
import Testing
import TestSupport
@testable import PushPipeline

/// Reservations made the way the pipeline makes them: the queues kept under this host's lock, each reservation's turns
/// taken in there and recorded by name.
final class SlotReservations: SlotQueuesHost {
    private struct State {
        var queues: AppConcurrencyLimits.Queues
        var names: [UInt64: String] = [:]
        var granted: [String: SlotPermit] = [:]
        var movedToEndpoint: [String] = []
    }

    let limits: AppConcurrencyLimits
    private let state: Locked<State>

    init(_ limits: AppConcurrencyLimits) {
        self.limits = limits
        state = Locked(State(queues: limits.makeQueues()))
        limits.keepQueues(in: self)
    }

    var granted: [String: SlotPermit] { state.withLock { $0.granted } }
    var movedToEndpoint: [String] { state.withLock { $0.movedToEndpoint } }

    /// Gives back the slots granted to the reservation of that name.
    func giveBack(_ name: String) {
        giveBack(state.withLock { $0.granted[name] }!)
    }

    func giveBack(_ permit: SlotPermit) {
        var permit: SlotPermit? = permit
        limits.giveBack(&permit)
    }

    func reserve(_ name: String, _ scope: DeliveryScope, lane: Lane = .normal) -> AppConcurrencyLimits.Reservation {
        state.withLock { state in
            let reservation = limits.reserve(scope, lane: lane, in: &state.queues)
            switch reservation {
            case .granted: break
            case .waitingForApp(let ticket), .waitingForEndpoint(let ticket): state.names[ticket] = name
            }
            return reservation
        }
    }

    /// Takes these reservations out of their queues; returns those that were still waiting.
    func withdraw(_ tickets: Set<UInt64>) -> Set<UInt64> {
        let (withdrawn, turns) = withQueues { queues in
            let (withdrawn, turns) = queues.withdraw(tickets)
            return (Set(withdrawn.map(\.id)), turns)
        }
        limits.carryOut(turns)
        return withdrawn
    }

    func withQueues<Result>(_ change: (inout AppConcurrencyLimits.Queues) -> (Result, [AppConcurrencyLimits.Turn]))
        -> (Result, [AppConcurrencyLimits.Turn])
    {
        state.withLock { state in
            let (result, turns) = change(&state.queues)
            for turn in turns {
                switch turn {
                case .granted(let waiter):
                    guard case .reservation = waiter.party, let name = state.names.removeValue(forKey: waiter.id) else { continue }
                    state.granted[name] = limits.permit(grantedTo: waiter)
                case .waitsForEndpoint(let waiter):
                    guard case .reservation = waiter.party, let name = state.names[waiter.id] else { continue }
                    state.movedToEndpoint.append(name)
                }
            }
            return (result, turns)
        }
    }
}

/// Scopes (apps) whose requests share one provider endpoint's connections share its slots too.
@Suite("Endpoint limits: requests beyond what an endpoint's connections carry wait as values")
struct EndpointLimitTests {
    private let endpoint = "https://push.example 1"
    private func scope(_ app: String, endpoint: String? = "https://push.example 1") -> DeliveryScope {
        DeliveryScope(provider: .proxy, key: app, endpoint: endpoint)
    }

    @Test("apps that share an endpoint share its slots: a request over the endpoint's limit keeps its app slot and waits, oldest first")
    func appsShareTheirEndpointsSlots() throws {
        // Three slots, one of them kept for urgent requests: two for these normal ones.
        let limits = AppConcurrencyLimits(limit: 5, endpointLimit: 3, metrics: PipelineMetrics())
        let tickets = SlotReservations(limits)
        guard case .granted(let first) = tickets.reserve("a1", scope("a")),
            case .granted(let second) = tickets.reserve("b1", scope("b")),
            case .waitingForEndpoint = tickets.reserve("a2", scope("a")),
            case .waitingForEndpoint = tickets.reserve("b2", scope("b"))
        else {
            Issue.record("the endpoint's two slots were not shared by both apps")
            return
        }
        #expect(limits.running(endpoint: endpoint) == 2)
        #expect(limits.running(scope("a")) == 2, "a request waiting for its endpoint holds its app's slot")
        guard case .granted(let elsewhere) = tickets.reserve("c1", scope("c", endpoint: "https://other.example")) else {
            Issue.record("another endpoint's request waited")
            return
        }
        tickets.giveBack(second)
        #expect(Set(tickets.granted.keys) == ["a2"], "the oldest request waiting for the endpoint goes first, whatever its app")
        tickets.giveBack(first)
        #expect(Set(tickets.granted.keys) == ["a2", "b2"])
        #expect(tickets.movedToEndpoint.isEmpty)
        for slot in tickets.granted.values { tickets.giveBack(slot) }
        tickets.giveBack(elsewhere)
        #expect(limits.running(endpoint: endpoint) == 0)
        #expect(limits.running(scope("a")) == 0 && limits.running(scope("b")) == 0)
    }

    @Test("a request parked on its app's limit gets the app slot first and then waits for the endpoint, told once, urgent before normal")
    func parkedRequestMovesOnToItsEndpoint() throws {
        let limits = AppConcurrencyLimits(limit: 1, endpointLimit: 1, metrics: PipelineMetrics())
        let tickets = SlotReservations(limits)
        guard case .granted(let a1) = tickets.reserve("a1", scope("a")),
            case .waitingForApp = tickets.reserve("a2", scope("a")),
            case .waitingForEndpoint = tickets.reserve("b1", scope("b")),
            case .waitingForEndpoint = tickets.reserve("c1", scope("c"), lane: .urgent)
        else {
            Issue.record("unexpected first answers")
            return
        }
        tickets.giveBack(a1)
        // The endpoint's slot goes to the urgent request; a2 takes its app's slot and waits for the endpoint.
        #expect(Set(tickets.granted.keys) == ["c1"])
        #expect(tickets.movedToEndpoint == ["a2"])
        tickets.giveBack("c1")
        #expect(Set(tickets.granted.keys) == ["c1", "b1"])
        tickets.giveBack("b1")
        #expect(Set(tickets.granted.keys) == ["c1", "b1", "a2"])
        #expect(tickets.movedToEndpoint == ["a2"])
        tickets.giveBack("a2")
        #expect(limits.running(endpoint: endpoint) == 0 && limits.running(scope("a")) == 0)
    }

    @Test("normal requests leave a tenth of an endpoint's slots to urgent ones: a call finds a slot while messages fill the rest")
    func urgentRequestsHaveAShareOfTheEndpoint() throws {
        let limits = AppConcurrencyLimits(limit: 100, endpointLimit: 10, metrics: PipelineMetrics())
        let tickets = SlotReservations(limits)
        for index in 0..<9 {
            guard case .granted = tickets.reserve("m\(index)", scope("chat")) else {
                Issue.record("message \(index) of the normal share waited")
                return
            }
        }
        guard case .waitingForEndpoint = tickets.reserve("m9", scope("chat")),
            case .granted(let call) = tickets.reserve("call", scope("voip"), lane: .urgent),
            case .waitingForEndpoint = tickets.reserve("call2", scope("voip"), lane: .urgent)
        else {
            Issue.record("the urgent share was not kept for urgent requests")
            return
        }
        tickets.giveBack(call)
        #expect(Set(tickets.granted.keys) == ["call2"], "a freed slot goes to the waiting urgent request")
        tickets.giveBack("call2")
        #expect(tickets.granted.count == 1, "the urgent share's slot does not go to a waiting message")
        #expect(limits.running(endpoint: endpoint) == 9)
    }

    @Test("withdrawing a request that waits for its endpoint gives its app slot to the app's next request, never to one withdrawn with it")
    func withdrawingGivesTheAppSlotOn() throws {
        let limits = AppConcurrencyLimits(limit: 1, endpointLimit: 1, metrics: PipelineMetrics())
        let tickets = SlotReservations(limits)
        guard case .granted(let a1) = tickets.reserve("a1", scope("a")),
            case .waitingForEndpoint(let b1) = tickets.reserve("b1", scope("b")),
            case .waitingForApp(let b2) = tickets.reserve("b2", scope("b")),
            case .waitingForApp(let b3) = tickets.reserve("b3", scope("b"))
        else {
            Issue.record("unexpected first answers")
            return
        }
        #expect(tickets.withdraw([b1, b2]) == [b1, b2])
        #expect(tickets.movedToEndpoint == ["b3"], "b1's app slot went to b3, which now waits for the endpoint")
        #expect(limits.running(scope("b")) == 1)
        #expect(tickets.withdraw([b3]) == [b3])
        #expect(limits.running(scope("b")) == 0)
        tickets.giveBack(a1)
        #expect(tickets.granted.isEmpty)
        #expect(limits.running(endpoint: endpoint) == 0)
    }

    @Test("a running request cancelled while it waits for its endpoint gives its app slot back")
    func cancelledAcquireGivesItsAppSlotBack() async throws {
        let limits = AppConcurrencyLimits(limit: 2, endpointLimit: 1, metrics: PipelineMetrics())
        #expect(await limits.acquire(scope("a"), lane: .normal, parking: nil))
        let waiting = Task { await limits.acquire(scope("b"), lane: .normal, parking: nil) }
        // A bound for a loaded machine, where the task may start late; the loop ends as soon as it waits.
        let deadline = ContinuousClock.now + .seconds(60)
        while limits.running(scope("b")) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(limits.running(scope("b")) == 1, "the waiting request holds its app slot")
        waiting.cancel()
        #expect(await waiting.value == false)
        #expect(limits.running(scope("b")) == 0)
        limits.release(scope("a"))
        #expect(limits.running(endpoint: endpoint) == 0)
        #expect(await limits.acquire(scope("b"), lane: .normal, parking: nil), "the endpoint's slot is free again")
        limits.release(scope("b"))
    }

    @Test("scopes without an endpoint, and workers without an endpoint limit, are bounded by the app limit only")
    func noEndpointNoSharedBound() {
        let unlimited = AppConcurrencyLimits(limit: 3, metrics: PipelineMetrics())
        let shared = SlotReservations(AppConcurrencyLimits(limit: 3, endpointLimit: 1, metrics: PipelineMetrics()))
        let unlimitedReservations = SlotReservations(unlimited)
        for app in ["a", "b", "c"] {
            guard case .granted = shared.reserve(app, scope(app, endpoint: nil)),
                case .granted = unlimitedReservations.reserve(app, scope(app))
            else {
                Issue.record("a request without a shared bound waited")
                return
            }
        }
        #expect(unlimited.running(endpoint: endpoint) == 0)
    }
}

@Suite("Endpoint limits in the pipeline", .serialized)
struct EndpointLimitPipelineTests {
    @Test(
        "jobs whose endpoint's slots are taken wait in flight as values, without a task: none starts beyond the in-flight limit, the lane reads on only to its read-ahead bound, and a stop gives them up unsent"
    )
    func jobsWaitForTheirEndpointAsValues() async throws {
        _ = TestMetrics.registry
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox) {
            $0.maximumInFlightJobs = 40
            $0.maximumReadAheadJobs = 80
            $0.urgentReservedInFlightJobs = 5
            $0.maximumInFlightPerApp = 100
            $0.maximumInFlightPerEndpoint = 5
        }
        // Two apps on the one proxy endpoint; its answers hang, so the first four requests hold the 4 of the endpoint's
        // 5 slots that normal requests may use (one is kept for urgent ones).
        try await produce(
            kafka,
            (0..<100).map { index in
                (
                    "hang-u\(index)",
                    jobJSON(id: "j\(index)", userId: "hang-u\(index)", targets: [appTarget("b\(index)", app: "app-\(index % 2)")])
                )
            })
        let running = harness.start()
        let deadline = ContinuousClock.now + .seconds(25)
        while harness.pipeline.jobsWaitingForAppSlot < 31 || sandbox.server.requests.count < 4, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(300))
        let (consumed, started, waiting) = (
            harness.pipeline.inFlightJobs, harness.pipeline.startedJobs, harness.pipeline.jobsWaitingForAppSlot
        )
        let requests = sandbox.server.requests.count
        let endpointRunning = harness.processor.appLimits.running(endpoint: "\(sandbox.url) ")
        harness.pipeline.stop()
        let waitingAfterStop = harness.pipeline.jobsWaitingForAppSlot
        try await harness.stop(running)
        let requestsAfterStop = sandbox.server.requests.count
        await sandbox.stop()

        #expect(requests == 4, "requests sent while the endpoint's 4 normal slots hang: \(requests)")
        #expect(endpointRunning == 4)
        #expect(started == 4, "only the jobs sending are started")
        #expect(waiting == 31, "the other jobs the normal lane may work on (35) wait for the endpoint as values")
        #expect(consumed == 80, "a job waiting for its endpoint counts in flight: the jobs read on to the read-ahead bound wait unstarted")
        #expect(waitingAfterStop == 0, "a stop gives up the jobs waiting for a slot at once")
        #expect(requestsAfterStop == requests, "slots freed by the stop's cancellations start none of the given-up jobs")
        #expect((TestMetrics.value(of: #"push_endpoint_concurrency_limited_total{provider="proxy"}"#) ?? 0) >= 31)
    }
}

import Foundation
import PushCore
import PushCrypto
import PushHTTP
import Synchronization
import Testing
import TestSupport
@testable import WebPushPlugin

/// A name server under the test's control: hosts named `hang…` do not answer until released, hosts named
/// `private…` resolve to 10.0.0.1, `nothing…` do not exist, `servfail…` fail (as a SERVFAIL does) while
/// `failing` is on, `slow…` answer after 200 ms; anything else resolves to 198.41.0.4.
final class ScriptedNameServer: Sendable {
    private let lookups = Mutex<[String: Int]>([:])
    private let lookupCount = Atomic<Int>(0)
    private let gate = DispatchSemaphore(value: 0)
    /// Off for runs over many hosts, whose memory is measured: then only `total` is kept.
    private let countsEachHost: Bool

    let failing = Atomic<Bool>(true)

    init(countsEachHost: Bool = true) { self.countsEachHost = countsEachHost }

    func lookup(_ host: String) -> HostResolver.LookupResult {
        lookupCount.add(1, ordering: .relaxed)
        if countsEachHost { lookups.withLock { $0[host, default: 0] += 1 } }
        if host.hasPrefix("hang") { gate.wait() }
        if host.hasPrefix("slow") { Thread.sleep(forTimeInterval: 0.2) }
        if host.hasPrefix("nothing") { return .noSuchHost }
        if host.hasPrefix("servfail"), failing.load(ordering: .relaxed) { return .failed("Temporary failure in name resolution") }
        return .found([IPAddress(host.hasPrefix("private") ? "10.0.0.1" : "198.41.0.4")!])
    }

    func lookups(of host: String) -> Int { lookups.withLock { $0[host, default: 0] } }
    var total: Int { lookupCount.load(ordering: .relaxed) }

    /// Lets every hanging lookup answer (so the test leaves no thread blocked).
    func releaseAll() {
        for _ in 0..<64 { gate.signal() }
    }

    func resolver(_ limits: HostResolver.Limits = HostResolver.Limits(), clock: FakeClock? = nil) -> HostResolver {
        if let clock {
            return HostResolver(limits: limits, clock: { clock.milliseconds }, lookup: { [self] in lookup($0) })
        }
        return HostResolver(limits: limits, lookup: { [self] in lookup($0) })
    }
}

/// Answers every request with one status and remembers the timeouts it was given.
final class AnsweringTransport: HTTPTransport {
    let status: Int
    private let timeouts = Mutex<[Duration]>([])

    init(status: Int) { self.status = status }

    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        timeouts.withLock { $0.append(request.timeout) }
        return HTTPResponse(status: status, headers: [], body: [])
    }

    var requestTimeouts: [Duration] { timeouts.withLock { $0 } }
    func closeConnections(except live: Set<ConnectionIdentity>) {}
    func shutdown() {}
}

enum WebPushDeliveries {
    static let keys: WebPushKeys = {
        let point = try! PrivateKey.generateP256().rawPublicKey()
        return WebPushKeys(p256dh: Base64URL.encode(point), auth: Base64URL.encode([UInt8](repeating: 7, count: 16)))
    }()

    static func delivery(_ endpoint: String, id: String = "j") -> Delivery {
        let target = Target.webPush("b-\(id)", endpoint: endpoint, keys: keys)
        let now = currentTimeMilliseconds()
        let job = Job(id: id, createdAt: now, ttl: 3600, kind: .message, priority: .normal, userId: "u", targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: now)
    }

    static func provider(
        _ resolver: HostResolver, transport: any HTTPTransport = AnsweringTransport(status: 201),
        timeout: Duration = .seconds(10)
    ) throws -> WebPushProvider {
        try WebPushProvider(
            configuration: WebPushConfiguration(
                vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com",
                timeout: timeout),
            transport: transport, resolver: resolver)
    }
}

@Suite("Web Push DNS: a bounded pool, a timeout, a small cache, one lookup per host, cancelled with its job")
struct HostResolverTests {
    @Test(
        "a host whose name server never answers ends the attempt at the DNS timeout as a retryable failure, while other hosts still resolve"
    )
    func hangingNameServer() async throws {
        let names = ScriptedNameServer()
        defer { names.releaseAll() }
        let resolver = names.resolver(HostResolver.Limits(threads: 2, timeout: .milliseconds(300)))
        let provider = try WebPushDeliveries.provider(resolver)
        let started = ContinuousClock.now
        // 20 jobs for the hanging host at once: they share one lookup, so one thread, and the other thread stays free.
        async let stuck = withTaskGroup(of: DeliveryResult.self) { group in
            for index in 0..<20 { group.addTask { await provider.deliver(WebPushDeliveries.delivery("https://hang.example/s/\(index)")) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        try await Task.sleep(for: .milliseconds(50))
        for index in 0..<10 {
            let result = await provider.deliver(WebPushDeliveries.delivery("https://fine\(index).example/s"))
            guard case .delivered = result else {
                Issue.record("fine\(index).example was not delivered: \(result)")
                return
            }
        }
        let results = await stuck
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        #expect(results.count == 20)
        for result in results {
            guard case .retryable(let reason, nil, _) = result else {
                Issue.record("expected retryable, got \(result)")
                continue
            }
            #expect(reason == "DNS lookup of the push service timed out")
        }
        #expect(names.lookups(of: "hang.example") == 1)
    }

    @Test("the lookup counts against the attempt's timeout: the request gets what is left")
    func lookupUsesTheAttemptBudget() async throws {
        let names = ScriptedNameServer()
        let transport = AnsweringTransport(status: 201)
        // A budget no stall of a loaded machine's task pool uses up: what is checked is that the lookup's share is taken from it.
        let provider = try WebPushDeliveries.provider(names.resolver(), transport: transport, timeout: .seconds(60))
        let result = await provider.deliver(WebPushDeliveries.delivery("https://slow.example/s"))
        guard case .delivered = result else {
            Issue.record("expected delivered, got \(result)")
            return
        }
        let timeout = try #require(transport.requestTimeouts.first)
        #expect(timeout <= .milliseconds(59_800), "at least 200 ms of the 60 s went to DNS")
        #expect(timeout > .zero)
    }

    @Test("an answer is cached: repeated lookups of a host ask the name server once until the answer's lifetime ends")
    func positiveCache() async {
        let names = ScriptedNameServer()
        let clock = FakeClock()
        let resolver = names.resolver(clock: clock)
        for _ in 0..<5 {
            #expect(await resolver.resolve("push.example", timeout: .seconds(5)) == .success([IPAddress("198.41.0.4")!]))
        }
        #expect(names.lookups(of: "push.example") == 1)
        clock.advance(milliseconds: 60_000)
        _ = await resolver.resolve("push.example", timeout: .seconds(5))
        #expect(names.lookups(of: "push.example") == 2)
    }

    @Test("no address is cached for a shorter time than an address")
    func negativeCache() async {
        let names = ScriptedNameServer()
        let clock = FakeClock()
        let resolver = names.resolver(clock: clock)
        #expect(await resolver.resolve("nothing.example", timeout: .seconds(5)) == .success([]))
        #expect(await resolver.resolve("nothing.example", timeout: .seconds(5)) == .success([]))
        #expect(names.lookups(of: "nothing.example") == 1)
        clock.advance(milliseconds: 10_000)
        #expect(await resolver.resolve("nothing.example", timeout: .seconds(5)) == .success([]))
        #expect(names.lookups(of: "nothing.example") == 2)
    }

    @Test("a lookup that fails for now (SERVFAIL, EAI_AGAIN) is retryable and never cached: the next attempt asks again")
    func transientFailureStaysTransient() async throws {
        let names = ScriptedNameServer()
        let resolver = names.resolver()
        let provider = try WebPushDeliveries.provider(resolver)
        let first = await provider.deliver(WebPushDeliveries.delivery("https://servfail.example/s"))
        guard case .retryable(let reason, nil, _) = first else {
            Issue.record("expected retryable, got \(first)")
            return
        }
        #expect(reason == "DNS lookup of the push service failed for now: Temporary failure in name resolution")
        #expect(
            await resolver.resolve("servfail.example", timeout: .seconds(5))
                == .failure(.lookupFailed("Temporary failure in name resolution")))
        #expect(names.lookups(of: "servfail.example") == 2)
        names.failing.store(false, ordering: .relaxed)
        let second = await provider.deliver(WebPushDeliveries.delivery("https://servfail.example/s"))
        guard case .delivered = second else {
            Issue.record("expected delivered once the name server answers, got \(second)")
            return
        }
        #expect(names.lookups(of: "servfail.example") == 3)
    }

    @Test("a host that does not exist (EAI_NONAME) ends the target as failed, not retried")
    func noSuchHostIsFinal() async throws {
        let names = ScriptedNameServer()
        let provider = try WebPushDeliveries.provider(names.resolver())
        let result = await provider.deliver(WebPushDeliveries.delivery("https://nothing.example/s"))
        guard case .failed(let reason, _, _, _) = result else {
            Issue.record("expected failed, got \(result)")
            return
        }
        #expect(reason == "endpoint refused, not sent: endpoint host does not resolve (no such name)")
    }

    @Test("a cancelled job stops waiting at once; the lookup it started still fills the cache")
    func cancellation() async throws {
        let names = ScriptedNameServer()
        defer { names.releaseAll() }
        let resolver = names.resolver(HostResolver.Limits(timeout: .seconds(60)))
        let waiting = Task { await resolver.resolve("hang-cancel.example", timeout: .seconds(60)) }
        while names.lookups(of: "hang-cancel.example") == 0 { try await Task.sleep(for: .milliseconds(10)) }
        waiting.cancel()
        #expect(await waiting.value == .failure(.cancelled))
        names.releaseAll()
        while resolver.cachedHosts == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(await resolver.resolve("hang-cancel.example", timeout: .seconds(5)) == .success([IPAddress("198.41.0.4")!]))
        #expect(names.lookups(of: "hang-cancel.example") == 1)
    }

    @Test("with every thread busy and the queue full, a lookup of another host fails at once as retryable")
    func fullQueue() async throws {
        let names = ScriptedNameServer()
        defer { names.releaseAll() }
        let resolver = names.resolver(HostResolver.Limits(threads: 1, queued: 1, timeout: .seconds(60)))
        let provider = try WebPushDeliveries.provider(resolver)
        let running = Task { await resolver.resolve("hang-1.example", timeout: .seconds(60)) }
        while names.lookups(of: "hang-1.example") == 0 { try await Task.sleep(for: .milliseconds(10)) }
        let queued = Task { await resolver.resolve("queued.example", timeout: .seconds(60)) }
        while resolver.hostsInFlight < 2 { try await Task.sleep(for: .milliseconds(10)) }
        let result = await provider.deliver(WebPushDeliveries.delivery("https://third.example/s"))
        guard case .retryable(let reason, nil, _) = result else {
            Issue.record("expected retryable, got \(result)")
            return
        }
        #expect(reason.contains("DNS lookups are queued to their limit"))
        names.releaseAll()
        #expect(await running.value == .success([IPAddress("198.41.0.4")!]))
        #expect(await queued.value == .success([IPAddress("198.41.0.4")!]))
    }
}

import Dispatch
import Metrics
import PushCore
#if canImport(Glibc)
    import Glibc
#endif

/// Resolves push-service host names for the endpoint policy, with limits, because the names
/// come from subscriptions anyone can register and a name server may never answer:
/// - lookups run on at most `Limits.threads` resolver threads; at most `Limits.queued` hosts wait
///   for one, and a lookup beyond that fails at once (`busy`, retryable);
/// - one lookup per host is in flight: later askers for that host join it, so a host whose name
///   server hangs holds one thread, not the pool;
/// - each asker waits at most its timeout (`PUSH_WEBPUSH_DNS_TIMEOUT_MS`, never past the attempt's
///   own budget) and returns at once when its task is cancelled; the thread may still finish
///   `getaddrinfo`, and its answer then only fills the cache;
/// - answers are cached in a `BoundedCache` (`Limits.cachedHosts` entries): found addresses for
///   `positiveLifetime`, "no such host" for the shorter `negativeLifetime`. `getaddrinfo` reports no
///   TTL, so these lifetimes are our guess at how long an answer stays true, kept short;
/// - a lookup that got no answer (a name server's SERVFAIL or silence, `EAI_AGAIN`, and every other
///   error but `EAI_NONAME`) is a transient failure for the askers of that moment: never cached, so
///   the next attempt asks again.
final class HostResolver: Sendable {
    struct Limits: Sendable {
        var threads = 4
        var queued = 256
        var timeout: Duration = .seconds(5)
        var positiveLifetime: Duration = .seconds(60)
        var negativeLifetime: Duration = .seconds(10)
        var cachedHosts = 10_000
    }

    enum Failure: Error, Equatable {
        /// No answer within the asker's timeout.
        case timedOut
        /// Every resolver thread is busy and the queue of hosts waiting for one is full.
        case busy
        case cancelled
        /// The lookup ended without an answer (`getaddrinfo`'s words for why).
        case lookupFailed(String)
    }

    /// What one lookup learnt of a host.
    enum LookupResult: Sendable, Equatable {
        /// Every address of the host (not empty).
        case found([IPAddress])
        /// The name does not exist (`EAI_NONAME`): an answer, cached for `negativeLifetime`.
        case noSuchHost
        /// No answer for now: the name server failed or did not answer (`EAI_AGAIN`), or anything else went
        /// wrong. Never cached.
        case failed(String)
    }

    /// The blocking lookup.
    typealias Lookup = @Sendable (_ host: String) -> LookupResult

    private struct Answer: Sendable {
        let addresses: [IPAddress]
        let expiresAt: Int64
    }

    private typealias Waiter = CheckedContinuation<Result<[IPAddress], Failure>, Never>

    private struct State: Sendable {
        var cache: BoundedCache<String, Answer>
        /// Hosts queued or being looked up, with the askers waiting for them. At most `queued + threads` entries.
        var inFlight: [String: [UInt64: Waiter]] = [:]
        var queue: [String] = []
        var threadsRunning = 0
        var nextWaiter: UInt64 = 0

        /// The cached answer for `host` if it is still fresh.
        mutating func fresh(_ host: String, now: Int64) -> [IPAddress]? {
            guard let answer = cache.value(for: host, now: now) else { return nil }
            guard now < answer.expiresAt else {
                cache.removeValue(for: host)
                return nil
            }
            return answer.addresses
        }
    }

    let limits: Limits
    private let lookup: Lookup
    private let clock: @Sendable () -> Int64
    private let state: Locked<State>
    private let cacheGauge = Gauge(label: "push_bounded_entries", dimensions: [("map", "webpush_dns_cache")])

    init(
        limits: Limits = Limits(), clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds,
        lookup: @escaping Lookup = HostResolver.systemLookup
    ) {
        self.limits = limits
        self.lookup = lookup
        self.clock = clock
        state = Locked(
            State(
                cache: BoundedCache(
                    capacity: limits.cachedHosts,
                    idleLimit: max(limits.positiveLifetime, limits.negativeLifetime))))
    }

    /// Cached answers held now (the `push_bounded_entries{map="webpush_dns_cache"}` gauge).
    var cachedHosts: Int { state.withLock { $0.cache.count } }
    /// Hosts queued or being looked up now.
    var hostsInFlight: Int { state.withLock { $0.inFlight.count } }

    /// The addresses of `host`, empty when it does not exist, waiting at most `timeout` (and never longer than
    /// `Limits.timeout`).
    func resolve(_ host: String, timeout: Duration) async -> Result<[IPAddress], Failure> {
        let now = clock()
        if let cached = state.withLock({ $0.fresh(host, now: now) }) { return .success(cached) }
        let waited = min(timeout, limits.timeout)
        guard waited > .zero else { return .failure(.timedOut) }
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: Waiter) in
                enum Start {
                    case answered(Result<[IPAddress], Failure>)
                    case joined
                    case queued(startThread: Bool)
                }
                let start = state.withLock { state -> Start in
                    // Checked under the lock that `onCancel` takes: a cancellation either finds this waiter or is seen here.
                    if Task.isCancelled { return .answered(.failure(.cancelled)) }
                    if let cached = state.fresh(host, now: clock()) { return .answered(.success(cached)) }
                    if state.inFlight[host] != nil {
                        state.inFlight[host]![id] = waiter
                        return .joined
                    }
                    guard state.queue.count < limits.queued else { return .answered(.failure(.busy)) }
                    state.inFlight[host] = [id: waiter]
                    state.queue.append(host)
                    guard state.threadsRunning < limits.threads else { return .queued(startThread: false) }
                    state.threadsRunning += 1
                    return .queued(startThread: true)
                }
                switch start {
                case .answered(let result):
                    waiter.resume(returning: result)
                    return
                case .queued(startThread: true):
                    NamedThread.start("webpush-dns") { [self] in work() }
                case .joined, .queued(startThread: false):
                    break
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(waited.milliseconds))) { [weak self] in
                    self?.abandon(host, waiter: id, with: .timedOut)
                }
            }
        } onCancel: {
            abandon(host, waiter: id, with: .cancelled)
        }
    }

    /// Ends one asker's wait; the lookup itself goes on for the others and the cache.
    private func abandon(_ host: String, waiter id: UInt64, with failure: Failure) {
        let waiter = state.withLock { $0.inFlight[host]?.removeValue(forKey: id) }
        waiter?.resume(returning: .failure(failure))
    }

    /// A resolver thread: looks up queued hosts until the queue is empty, then ends.
    private func work() {
        while let host = next() {
            let result: Result<[IPAddress], Failure>
            let lifetime: Duration?
            switch lookup(host) {
            case .found(let addresses) where !addresses.isEmpty: (result, lifetime) = (.success(addresses), limits.positiveLifetime)
            case .found, .noSuchHost: (result, lifetime) = (.success([]), limits.negativeLifetime)
            case .failed(let reason): (result, lifetime) = (.failure(.lookupFailed(reason)), nil)
            }
            let now = clock()
            let (waiters, cached) = state.withLock { state in
                if let lifetime, case .success(let addresses) = result {
                    state.cache.set(
                        Answer(addresses: addresses, expiresAt: now.adding(saturating: lifetime.milliseconds)), for: host, now: now)
                }
                return (state.inFlight.removeValue(forKey: host) ?? [:], state.cache.count)
            }
            cacheGauge.record(cached)
            for waiter in waiters.values { waiter.resume(returning: result) }
        }
    }

    /// The next queued host someone still waits for; nil (and this thread ends) when there is none.
    private func next() -> String? {
        state.withLock { state in
            while !state.queue.isEmpty {
                let host = state.queue.removeFirst()
                // Everyone who asked gave up while it queued: not worth a thread.
                if state.inFlight[host]?.isEmpty ?? true {
                    state.inFlight[host] = nil
                    continue
                }
                return host
            }
            state.threadsRunning -= 1
            return nil
        }
    }

    /// `getaddrinfo`, which blocks: the only C call of the resolver.
    static func systemLookup(_ host: String) -> LookupResult {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &result)
        guard status == 0, let first = result else {
            if status == EAI_NONAME { return .noSuchHost }
            if status == EAI_SYSTEM { return .failed(String(cString: strerror(errno))) }
            return .failed(String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(first) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr.flatMap(IPAddress.init(socketAddress:)) { addresses.append(address) }
            cursor = entry.pointee.ai_next
        }
        return addresses.isEmpty ? .noSuchHost : .found(addresses)
    }
}

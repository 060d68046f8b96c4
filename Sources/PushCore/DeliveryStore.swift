/// What the pipeline must know about a (job, target) before it sends.
public enum PriorState: Sendable, Equatable {
    /// Nothing recorded: go ahead.
    case fresh
    /// This job already reached a final outcome for this binding (a redelivery): publish it again, do not send.
    case alreadyFinished(Outcome)
    /// Another job with the same dedupe identity went to this binding inside the window.
    case duplicate(ofJob: String)
    /// This (job, binding) already waits in the retry queue (a redelivery after a hand-off): the queue owns it.
    case inRetryQueue

    public var isAlreadyFinished: Bool {
        if case .alreadyFinished = self { true } else { false }
    }
}

/// Shared state that makes sends idempotent and enforces dedupe windows across replicas. A store keeps final
/// outcomes and cancels for the retention it was made with (`PUSH_IDEMPOTENCY_TTL_S`).
///
/// A record is read only where one can exist: a job whose offset no owner of its partition handed out before
/// (`firstDelivery`, which the partition's mark tells, see `PartitionMark`) has none, so its checks only claim
/// the dedupe window.
public protocol DeliveryStore: Sendable {
    /// For each target of `job`: its recorded final outcome, its pending retry entry, or else
    /// a dedupe claim for `window` milliseconds (0 = no dedupe) in the name of this job.
    /// `firstDelivery`: no owner of the job's partition handed its offset out before, so no record of it can exist
    /// (unless the same job was produced twice: the claim's holder then says so, and the records are read).
    /// With no task waiting: `completion` runs once, on the store's thread (or before `prepare` returns, for a store
    /// in memory), with the states or the error.
    func prepare(
        _ job: Job, dedupeWindow: Int64, firstDelivery: Bool, completion: @escaping @Sendable (Result<[PriorState], any Error>) -> Void)
    /// Records final outcomes (in one round trip where the store can), with no task waiting:
    /// `completion` gets nil once every one is recorded, else the error.
    func record(_ outcomes: [EncodedOutcome], completion: @escaping @Sendable ((any Error)?) -> Void)
    /// The recorded final outcome of `target` of `job`, if any.
    func recordedOutcome(of job: Job, target: Target) async throws -> Outcome?
    /// Records that `cancel` stops its user's calls with the same `CallCancellation.key` on each of its
    /// bindings.
    func recordCancellation(_ cancel: Job) async throws
    /// The cancel recorded for `call`'s key on `bindingId`, if one was made after the call.
    func cancellation(of call: Job, bindingId: String) async throws -> CallCancellation?
    /// Takes `partition` for a new owner: a new fence (an earlier owner's `advanceMark` fails from now on) and
    /// the highest offset any earlier owner marked.
    func takeMark(of partition: MarkedPartition) async throws -> PartitionMark
    /// Raises the partition's mark to `offset` (never lowers it) while `fence` is still the partition's;
    /// false when another owner took the partition since.
    func advanceMark(of partition: MarkedPartition, fence: Int64, to offset: Int64) async throws -> Bool
}

extension DeliveryStore {
    /// `prepare`, returning once the store answered.
    public func prepare(_ job: Job, dedupeWindow: Int64, firstDelivery: Bool) async throws -> [PriorState] {
        try await withCheckedThrowingContinuation { continuation in
            prepare(job, dedupeWindow: dedupeWindow, firstDelivery: firstDelivery) { continuation.resume(with: $0) }
        }
    }

    /// `prepare` for a job whose offset may have been handed out before: the records are read.
    public func prepare(_ job: Job, dedupeWindow: Int64) async throws -> [PriorState] {
        try await prepare(job, dedupeWindow: dedupeWindow, firstDelivery: false)
    }

    /// Records final outcomes and returns once they are recorded.
    public func record(_ outcomes: [Outcome]) async throws {
        let encoded = outcomes.map(EncodedOutcome.init)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            record(encoded) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    public func record(_ outcome: Outcome) async throws { try await record([outcome]) }
}

/// One partition of one consumer group's topic: the unit whose offsets a mark covers.
public struct MarkedPartition: Sendable, Hashable, CustomStringConvertible {
    public var group: String
    public var topic: String
    public var partition: Int32

    public init(group: String, topic: String, partition: Int32) {
        self.group = group
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(group)/\(topic)/\(partition)" }
}

/// A partition's mark as a new owner takes it. Every owner raises the mark past an offset before it writes
/// anything for that offset's job (a dedupe claim, a record), so an offset above the mark was never handed
/// out: its job is delivered for the first time and its records need no read. The fence stops an owner that
/// lost the partition from raising the mark after the next owner read it.
public struct PartitionMark: Sendable, Equatable {
    public var fence: Int64
    /// The highest offset an earlier owner marked; nil when none ever did.
    public var offset: Int64?

    public init(fence: Int64, offset: Int64?) {
        self.fence = fence
        self.offset = offset
    }
}

/// A cancel that stops a call: a `cancel` job with the same `dedupeKey` (else `collapseKey`) as a `call` of the
/// same user stops that call on the cancel's bindings — pending retries end `expired`, and an attempt in flight
/// is not retried. Only calls created before the cancel are stopped, so a key reused for a later call is not.
public struct CallCancellation: Sendable, Equatable {
    public var cancelJobId: String
    /// The cancel's `createdAt` (ms).
    public var createdAt: Int64

    public init(cancelJobId: String, createdAt: Int64) {
        self.cancelJobId = cancelJobId
        self.createdAt = createdAt
    }

    /// The key that ties a cancel to its call; nil when the job has none.
    public static func key(of job: Job) -> String? { job.dedupeKey ?? job.collapseKey }

    /// Whether this cancellation stops `call` (created at or before the cancel).
    public func stops(_ call: Job) -> Bool { call.kind == .call && call.createdAt <= createdAt }

    /// The stored form: `<createdAt>:<cancel job id>`.
    public var encoded: String { "\(createdAt):\(cancelJobId)" }

    public init?(encoded text: String) {
        guard let colon = text.firstIndex(of: ":"), let createdAt = Int64(text[..<colon]) else { return nil }
        self.init(cancelJobId: String(text[text.index(after: colon)...]), createdAt: createdAt)
    }
}

/// A retry waiting in the shared queue: the job as consumed, and which target.
public struct RetryEntry: Sendable, Equatable {
    public var id: String
    /// The job's original Kafka value (it was valid when consumed).
    public var jobBytes: [UInt8]
    /// The job's Kafka key, for a dead letter if the attempts run out.
    public var kafkaKey: [UInt8]?
    /// The Kafka timestamp, for jobs without `createdAt`.
    public var fallbackCreatedAt: Int64
    public var bindingId: String
    /// Attempts made so far.
    public var attempts: Int
    public var lastReason: String
    public var lastHTTPStatus: Int?

    /// The entry id of one (job, binding): at most one retry entry exists per delivery.
    /// `<length of jobId>:<jobId>/<bindingId>`: unambiguous whatever the ids contain.
    public static func id(jobId: String, bindingId: String) -> String { "\(jobId.utf8.count):\(jobId)/\(bindingId)" }

    public init(
        id: String, jobBytes: [UInt8], kafkaKey: [UInt8]?, fallbackCreatedAt: Int64, bindingId: String, attempts: Int,
        lastReason: String, lastHTTPStatus: Int?
    ) {
        self.id = id
        self.jobBytes = jobBytes
        self.kafkaKey = kafkaKey
        self.fallbackCreatedAt = fallbackCreatedAt
        self.bindingId = bindingId
        self.attempts = attempts
        self.lastReason = lastReason
        self.lastHTTPStatus = lastHTTPStatus
    }
}

/// A claim's hold on a retry entry: the lease's end as the queue's clock set it when it claimed or renewed the entry.
/// The end marks this holder: a renewal extends the lease only while the entry still carries it, so a lease that
/// lapsed and was taken over by another replica is never extended.
public struct RetryLease: Sendable, Hashable {
    public var id: String
    /// Milliseconds on the queue's clock (Redis's, not a replica's).
    public var end: Int64

    public init(id: String, end: Int64) {
        self.id = id
        self.end = end
    }
}

/// A claimed retry entry and the lease it is held under.
public struct RetryClaim: Sendable, Equatable {
    public var entry: RetryEntry
    public var lease: RetryLease

    public init(entry: RetryEntry, lease: RetryLease) {
        self.entry = entry
        self.lease = lease
    }
}

/// A durable, shared queue of due retries. A claim is a lease, judged by the queue's clock (never a replica's):
/// an entry claimed by a worker that dies becomes due again when the lease ends; a worker renews the leases of
/// the entries it still runs.
public protocol RetryQueue: Sendable {
    /// Stores the entry, due at `dueAt` on the caller's clock (the queue may keep it as a delay from now); returns
    /// once the entry is durable, or throws (the write is idempotent: the caller may retry it). `ReplicationShortfall`:
    /// the entry was written, but no replica acknowledged it in time; `confirm` it rather than write it again.
    func schedule(_ entry: RetryEntry, dueAt: Int64) async throws
    /// Whether the entry `id` is in the queue, answered once it is durable: where the queue's node has replicas, once
    /// one acknowledged everything the node held when it was asked. Throws `ReplicationShortfall` when none did in time.
    func confirm(_ id: String) async throws -> Bool
    /// Entries due now, each leased to the caller for `lease` from now.
    func claimDue(limit: Int, lease: Duration) async throws -> [RetryClaim]
    /// Extends each lease the caller still holds to `lease` from now: the renewed lease, in order, or nil where
    /// the entry no longer carries it (taken over by another claim, moved on or completed).
    func renew(_ leases: [RetryLease], for lease: Duration) async throws -> [RetryLease?]
    /// Removes a finished entry.
    func complete(_ id: String) async throws
    /// Number of entries waiting (due or not).
    func count() async throws -> Int
    /// Entries waiting, and those of them due more than `overdueAfter` ago and not claimed since, judged by the queue's clock.
    func depth(overdueAfter: Duration) async throws -> RetryQueueDepth
}

extension RetryQueue {
    /// A queue without replicas never falls short (`schedule` returns once the entry is durable), so it is never asked.
    public func confirm(_ id: String) async throws -> Bool { true }
}

/// The store answered, but fewer of its replicas than required acknowledged a write, or the writes a read depends on,
/// within the wait: the data is on the primary only, where a failover now could lose it. Not a store outage (the
/// primary answers): the caller keeps what depends on it (a Kafka offset) uncommitted and asks again later.
public struct ReplicationShortfall: Error, Sendable, Equatable, CustomStringConvertible {
    /// The node that answered (an address, never a job's data).
    public var node: String
    public var acknowledged: Int
    public var required: Int

    public init(node: String, acknowledged: Int, required: Int) {
        self.node = node
        self.acknowledged = acknowledged
        self.required = required
    }

    public var description: String { "\(acknowledged) of \(required) replicas of \(node) acknowledged in time (WAIT)" }
}

/// How full the retry queue is: what the `push_retry_queue_entries` and `push_retry_queue_overdue_entries` gauges show.
public struct RetryQueueDepth: Sendable, Equatable {
    public var entries: Int
    /// Due a while ago and claimed by no replica since: the replicas' schedulers do not keep up, or none runs.
    public var overdue: Int

    public init(entries: Int, overdue: Int) {
        self.entries = entries
        self.overdue = overdue
    }
}

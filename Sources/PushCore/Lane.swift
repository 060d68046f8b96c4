/// The two intake lanes. A call push is worth something for about 30 seconds and a chat
/// push can wait, so calls and cancels come in on their own topic (`PUSH_URGENT_TOPIC`),
/// with their own consumer, a reserved share of in-flight jobs and priority for HTTP/2
/// streams: a chat backlog never sits in front of a call.
public enum Lane: String, Sendable, CaseIterable, Hashable {
    /// `call` and `cancel` jobs (the urgent topic, or such jobs on the normal topic).
    case urgent
    /// Everything else: messages, custom pushes, wake-ups.
    case normal

    /// The lane a job's kind belongs to, wherever it was consumed.
    public init(kind: JobKind) {
        switch kind {
        case .call, .cancel: self = .urgent
        case .message, .custom, .wake: self = .normal
        }
    }

    /// The priority a delivery gets: the urgent lane's jobs, and calls or cancels from either topic.
    public static func delivery(consumedOn lane: Lane?, kind: JobKind) -> Lane {
        lane == .urgent ? .urgent : Lane(kind: kind)
    }
}

/// A capacity both lanes share (streams of a host, slots of a provider endpoint), of which normal work leaves a
/// part to urgent work, so a call never waits behind a backlog of messages: urgent work may use all of it, normal
/// work all but the reserved part, and never less than one.
public struct LaneCapacity: Sendable, Equatable {
    public let total: Int
    /// What normal work may use.
    public let normal: Int

    /// - Parameter reservedForUrgent: the part only urgent work may use; nil: a tenth of `total`, at least one.
    public init(total: Int, reservedForUrgent: Int? = nil) {
        self.total = max(1, total)
        let reserved = reservedForUrgent ?? max(1, self.total / 10)
        normal = max(1, self.total - max(0, reserved))
    }

    /// What work of `lane` may use.
    public func limit(for lane: Lane) -> Int { lane == .urgent ? total : normal }

    /// Whether work of `lane` may take one more while `used` are taken, work of both lanes together.
    public func hasRoom(for lane: Lane, used: Int) -> Bool { used < limit(for: lane) }
}

/// Overload policy for the normal lane: when it lags more than the threshold behind its
/// topic, a `message` whose remaining TTL is shorter than that lag cannot arrive in time
/// and is expired with reason `shed` instead of being sent late. Calls and cancels are
/// never shed (they are not messages), nor is anything consumed on the urgent lane.
public struct ShedPolicy: Sendable, Equatable {
    /// Lane lag (now − Kafka timestamp of the job being consumed) above which shedding starts; nil: never shed.
    public var lagThresholdMilliseconds: Int64?

    public init(lagThresholdMilliseconds: Int64? = nil) {
        self.lagThresholdMilliseconds = lagThresholdMilliseconds
    }

    public static let off = ShedPolicy()

    /// The outcome reason of a shed target.
    public static let reason = "shed"

    /// Whether a job consumed on `lane`, `lagMilliseconds` after it was produced, is shed at `now`.
    public func sheds(kind: JobKind, deadline: Deadline, lane: Lane, lagMilliseconds: Int64, now: Int64) -> Bool {
        guard let threshold = lagThresholdMilliseconds, lane == .normal, kind == .message, lagMilliseconds > threshold else {
            return false
        }
        return deadline.remainingMilliseconds(at: now) < lagMilliseconds
    }
}

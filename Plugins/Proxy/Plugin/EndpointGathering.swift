import PushCore
import Synchronization

/// Gathers the deliveries of one job to one proxy, so they go out as one request with every endpoint in
/// `endpointData`, as the push-proxy spec asks. The pipeline delivers a job's targets concurrently: the first
/// one to arrive opens a group keyed by (job instance, app, attempt); the group is sent when all the job's targets
/// at that proxy have joined, or when the gathering window ends (a target that was deduplicated, already
/// finished or held back never joins). Every delivery of the group gets the request's result.
///
/// A group is one job *instance* (`Job.instance`: one consumed message, one claimed retry), never a job id: two jobs
/// in flight that reuse an id (two partitions, a producer's bug) are different users' content, and a request carries
/// one user's content to the endpoints in it.
final class EndpointGathering: Sendable {
    typealias Send = @Sendable ([Delivery]) async -> DeliveryResult

    private struct Key: Hashable {
        let job: ObjectIdentifier
        let app: String?
        let attempt: Int

        init(_ delivery: Delivery) {
            job = delivery.job.instance
            app = delivery.target.app
            attempt = delivery.attempt
        }
    }

    private struct Group {
        var deliveries: [Delivery] = []
        var waiting: [CheckedContinuation<DeliveryResult, Never>] = []
        let expected: Int
        /// Which opening of its key this group is: the window of a group already sent never ends a later one.
        let opening: UInt64
    }

    private struct State {
        var groups: [Key: Group] = [:]
        var openings: UInt64 = 0
    }

    private let state = Mutex(State())
    private let window: Duration
    private let send: Send

    init(window: Duration, send: @escaping Send) {
        self.window = window
        self.send = send
    }

    /// `expected`: how many of the job's targets go to this proxy (more than one: a job's only target there is sent
    /// through the provider's request, `ProxyProvider.prepare`).
    func deliver(_ delivery: Delivery, expected: Int) async -> DeliveryResult {
        let key = Key(delivery)
        return await withCheckedContinuation { continuation in
            let (opened, complete) = state.withLock { state -> (UInt64?, Group?) in
                var opened: UInt64?
                var group: Group
                if let existing = state.groups[key] {
                    group = existing
                } else {
                    state.openings &+= 1
                    opened = state.openings
                    group = Group(expected: expected, opening: state.openings)
                }
                group.deliveries.append(delivery)
                group.waiting.append(continuation)
                if group.deliveries.count >= group.expected {
                    state.groups[key] = nil
                    return (opened, group)
                }
                state.groups[key] = group
                return (opened, nil)
            }
            if let complete {
                Task { await self.finish(complete) }
            } else if let opened {
                Task {
                    try? await Task.sleep(for: self.window)
                    let due = self.state.withLock { state -> Group? in
                        guard state.groups[key]?.opening == opened else { return nil }
                        return state.groups.removeValue(forKey: key)
                    }
                    if let due { await self.finish(due) }
                }
            }
        }
    }

    private func finish(_ group: Group) async {
        let result = await send(group.deliveries)
        for continuation in group.waiting { continuation.resume(returning: result) }
    }
}

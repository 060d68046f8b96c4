import PushCore
import Synchronization

/// Gathers the deliveries of one job to one proxy, so they go out as one request with every endpoint in
/// `endpointData`, as the push-proxy spec asks. The pipeline delivers a job's targets concurrently: the first
/// one to arrive opens a group keyed by (job, app, attempt); the group is sent when all the job's targets at
/// that proxy have joined, or when the gathering window ends (a target that was deduplicated, already
/// finished or held back never joins). Every delivery of the group gets the request's result.
final class EndpointGathering: Sendable {
    typealias Send = @Sendable ([Delivery]) async -> DeliveryResult

    private struct Group {
        var deliveries: [Delivery] = []
        var waiting: [CheckedContinuation<DeliveryResult, Never>] = []
        let expected: Int
    }

    private let groups = Mutex<[String: Group]>([:])
    private let window: Duration
    private let send: Send

    init(window: Duration, send: @escaping Send) {
        self.window = window
        self.send = send
    }

    func deliver(_ delivery: Delivery, expected: Int) async -> DeliveryResult {
        guard expected > 1 else { return await send([delivery]) }
        let key = "\(delivery.job.id.utf8.count):\(delivery.job.id)/\(delivery.target.app ?? "")/\(delivery.attempt)"
        return await withCheckedContinuation { continuation in
            let (opened, complete) = groups.withLock { groups -> (Bool, Group?) in
                var group = groups[key] ?? Group(expected: expected)
                let opened = group.deliveries.isEmpty
                group.deliveries.append(delivery)
                group.waiting.append(continuation)
                if group.deliveries.count >= group.expected {
                    groups[key] = nil
                    return (opened, group)
                }
                groups[key] = group
                return (opened, nil)
            }
            if let complete {
                Task { await self.finish(complete) }
            } else if opened {
                Task {
                    try? await Task.sleep(for: self.window)
                    if let due = self.groups.withLock({ $0.removeValue(forKey: key) }) { await self.finish(due) }
                }
            }
        }
    }

    private func finish(_ group: Group) async {
        let result = await send(group.deliveries)
        for continuation in group.waiting { continuation.resume(returning: result) }
    }
}

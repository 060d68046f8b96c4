/// Dedupe windows (Mizu `pushnotification_ignoresubssame`): a second push to the same
/// binding with the same identity inside the window is dropped as `deduplicated`.
public struct DedupeWindows: Sendable, Equatable {
    /// Window per kind, in milliseconds; 0 disables dedupe for that kind.
    public var milliseconds: [JobKind: Int64]

    /// 5 s for calls, 10 s for messages. Off for cancels (two cancels of different calls
    /// must both go out), custom pushes and wake-ups unless configured.
    public static let `default` = DedupeWindows(milliseconds: [.call: 5_000, .message: 10_000, .cancel: 0, .custom: 0, .wake: 0])

    public init(milliseconds: [JobKind: Int64]) { self.milliseconds = milliseconds }

    public func window(for kind: JobKind) -> Int64 { milliseconds[kind] ?? 0 }

    /// What makes two pushes "the same": `dedupeKey`, else `collapseKey`, else the kind.
    /// A cancel's identity lives in its own namespace, so a cancel is never deduplicated
    /// against the call it cancels, even when both carry the call's collapse or dedupe key.
    public static func identity(of job: Job) -> String {
        guard let key = job.dedupeKey ?? job.collapseKey else { return "kind:\(job.kind.rawValue)" }
        return job.kind == .cancel ? "cancel|\(key)" : key
    }
}

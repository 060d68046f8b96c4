import Logging
import PushCore

/// The log line of a target's final outcome, one per delivery: `delivery finished` at `info`, with the outcome's
/// job, binding, provider, app, status, attempts, HTTP status and reason.
public enum FinishedDeliveryLog {
    public static let message: Logger.Message = "delivery finished"

    /// The line's metadata; a field the outcome does not have is `-`.
    public static func metadata(of outcome: Outcome) -> Logger.Metadata {
        [
            "jobId": .string(outcome.jobId), "bindingId": .string(outcome.bindingId), "provider": .string(outcome.provider.rawValue),
            "app": .string(outcome.app ?? "-"), "status": .string(outcome.status.rawValue), "attempts": .string(String(outcome.attempts)),
            "httpStatus": .string(outcome.httpStatus.map(String.init) ?? "-"), "reason": .string(outcome.reason ?? "-"),
        ]
    }
}

/// A log handler that writes the line of a finished delivery itself, the same line `log(event:)` would write for
/// `FinishedDeliveryLog.message` and `metadata(of:)` at `info`, without a metadata dictionary made per delivery.
public protocol FinishedDeliveryLogging: LogHandler {
    func logFinishedDelivery(_ outcome: Outcome)
}

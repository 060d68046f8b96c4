import PushCore
import PushKafka

/// Something a processed job or retry puts on Kafka.
public enum Publication: Sendable {
    case outcome(Outcome)
    /// The job's original bytes and key, with why it is dead.
    case deadLetter(JobRejection, value: [UInt8], key: [UInt8]?, source: String)
}

/// What became of one consumed message or claimed retry.
public enum ProcessedJob: Sendable {
    /// Publish these; then the job (or retry entry) is done. `handedOff` means a target
    /// went (back) to the retry queue, so a retry entry must not be completed.
    case publish([Publication], handedOff: Bool)
    /// A stop interrupted it: it stays uncommitted (or leased) and is processed again later.
    case abandoned
}

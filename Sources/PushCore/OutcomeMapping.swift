/// The one place where a plugin's classified result becomes an outcome's status and action.
extension Outcome {
    /// The longest `providerMessageId` kept, in UTF-8 bytes, cut on a character boundary. Provider ids are far shorter
    /// (an `apns-id` is 36, FCM's message name about 80), but a Web Push service's `Location` header may take the
    /// transport's whole header bound (16 KiB): stored in Redis and published with every outcome, it would let a push
    /// service bloat both.
    public static let maximumProviderMessageIdBytes = 256

    public init(job: Job, target: Target, result: DeliveryResult, attempts: Int, at now: Int64) {
        // Every field worked out first, then set at once: each field set afterwards would make the outcome a new box.
        let status: Status
        var reason: String?
        var providerMessageId: String?
        var action = Action.none
        var invalidSince: Int64?
        var truncated = false
        var token: BindingToken?
        switch result {
        case .delivered(let messageId, _, let shortened):
            status = .delivered
            providerMessageId = messageId.map { $0.utf8Prefix(Self.maximumProviderMessageIdBytes) }
            truncated = shortened
        case .rejected(let rejection, _, let since, let deadToken):
            status = .rejected
            reason = rejection
            // A dead half of a dual binding: the other token may live, so the binding stays and the outcome names the half.
            action = deadToken == nil ? .removeBinding : .none
            token = deadToken
            invalidSince = since
        case .retryable(let retryReason, _, _):
            status = .retrying
            reason = retryReason
        case .failed(let failure, _, let failureAction, _):
            status = .failed
            reason = failure
            action = failureAction
        }
        self.init(
            jobId: job.id, userId: job.userId, bindingId: target.bindingId, provider: target.provider, app: target.app,
            status: status, reason: reason, httpStatus: result.httpStatus, providerMessageId: providerMessageId, action: action,
            invalidSince: invalidSince, attempts: attempts, truncated: truncated, token: token, at: now)
    }

    /// An outcome decided by the pipeline without a provider answer (expired, deduplicated, no plugin…).
    public init(
        job: Job, target: Target, status: Status, reason: String?, attempts: Int, at now: Int64,
        httpStatus: Int? = nil, action: Action = .none
    ) {
        self.init(
            jobId: job.id, userId: job.userId, bindingId: target.bindingId, provider: target.provider,
            app: target.app, status: status, reason: reason, httpStatus: httpStatus, action: action,
            attempts: attempts, at: now)
    }

    /// A target whose device unbound itself (RFC 8599 `pn-prid=null`, X-MPUSH `null`):
    /// nothing is sent, the upstream removes the binding.
    public init(unboundJob job: Job, target: Target, at now: Int64) {
        self.init(
            job: job, target: target, status: .rejected,
            reason: "the device unbound itself (token null); not sent", attempts: 0, at: now, action: .removeBinding)
    }

    /// A target the job named in a way that cannot be understood (`Target.refusal`): nothing is sent and nothing is
    /// removed (the binding may be fine and the producer wrong); the reason is the rule it broke.
    public init(refusedJob job: Job, target: Target, at now: Int64) {
        self.init(
            job: job, target: target, status: .rejected, reason: (target.refusal?.description ?? "invalid target") + "; not sent",
            attempts: 0, at: now)
    }

    /// A target not sent because the normal lane is overloaded and the job's TTL cannot be met (`ShedPolicy`).
    public init(shedJob job: Job, target: Target, at now: Int64) {
        self.init(job: job, target: target, status: .expired, reason: ShedPolicy.reason, attempts: 0, at: now)
    }
}

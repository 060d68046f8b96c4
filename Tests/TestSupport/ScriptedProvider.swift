import ProxyPlugin
import PushCore
import Synchronization

/// A plugin whose answer depends on the target, counting what it was asked to send per app.
public final class ScriptedProvider: PushProvider {
    public let id: ProviderID
    public let targetFormat: any TargetFormat
    private let calls = Mutex<[String: Int]>([:])
    private let answer: @Sendable (Target) -> DeliveryResult
    private let scope: @Sendable (Target) -> DeliveryScope

    /// - Parameter format: how jobs write its targets; nil: as push-proxy targets, under `id`.
    public init(
        id: ProviderID = .proxy, format: (any TargetFormat)? = nil,
        scope: @escaping @Sendable (Target) -> DeliveryScope = DeliveryScope.app(of:),
        answer: @escaping @Sendable (Target) -> DeliveryResult
    ) {
        self.id = id
        self.targetFormat = format ?? ProxyFieldsFormat(provider: id)
        self.scope = scope
        self.answer = answer
    }

    public func scope(of target: Target) -> DeliveryScope { scope(target) }

    public func deliver(_ delivery: Delivery) async -> DeliveryResult {
        calls.withLock { $0[delivery.target.app ?? "-", default: 0] += 1 }
        return answer(delivery.target)
    }

    public func calls(for app: String) -> Int { calls.withLock { $0[app] ?? 0 } }
}

/// Push-proxy target fields under another provider's name, for scripted providers.
struct ProxyFieldsFormat: TargetFormat {
    let provider: ProviderID

    func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails {
        try ProxyTargetFormat().decode(&fields)
    }
}

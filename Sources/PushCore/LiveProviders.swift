/// The providers jobs are delivered with now: a registry that live configuration replaces whole when `PUSH_APPS_FILE`
/// or a credential file changes. A delivery reads it once per attempt and keeps the provider it got, so a request in
/// flight finishes with the credentials it started with while the next attempt uses the new ones.
public final class LiveProviders: Sendable {
    private let registry: Locked<ProviderRegistry>

    public init(_ registry: ProviderRegistry) { self.registry = Locked(registry) }

    public var current: ProviderRegistry { registry.withLock { $0 } }

    /// Puts `next` in place of the current registry, which it returns.
    @discardableResult
    public func replace(with next: ProviderRegistry) -> ProviderRegistry {
        registry.withLock { current in
            let previous = current
            current = next
            return previous
        }
    }

    public func provider(for id: ProviderID) -> (any PushProvider)? { registry.withLock { $0.provider(for: id) } }
}

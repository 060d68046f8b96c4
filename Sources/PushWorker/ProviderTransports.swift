import PushCore
import PushHTTP

/// The plugins' transports, one per name for the worker's lifetime (`ProviderContext.makeTransport`): a provider that
/// live configuration builds again gets its predecessor's transport and connections, so an identity that did not
/// change keeps its connections and the predecessor's requests in flight finish on them. Names come from the linked
/// plugins' code, a handful.
final class ProviderTransports: Sendable {
    private let transports = Locked<[String: any HTTPTransport]>([:])
    private let make: @Sendable (String) -> any HTTPTransport

    init(make: @escaping @Sendable (_ name: String) -> any HTTPTransport) { self.make = make }

    func transport(named name: String) -> any HTTPTransport {
        transports.withLock { transports in
            if let made = transports[name] { return made }
            let made = make(name)
            transports[name] = made
            return made
        }
    }

    var all: [any HTTPTransport] { transports.withLock { Array($0.values) } }

    /// Closes, on every transport, the connections of identities none of `providers` uses.
    func closeConnections(unusedBy providers: [any PushProvider]) {
        let live = providers.reduce(into: Set<ConnectionIdentity>()) { $0.formUnion($1.connectionIdentities) }
        for transport in all { transport.closeConnections(except: live) }
    }

    func shutdown() { for transport in all { transport.shutdown() } }
}

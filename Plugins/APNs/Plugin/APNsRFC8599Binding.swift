import PushCore

/// An RFC 8599 APNs binding as Flexisip and Linphone write it (Flexisip, `src/pushnotification/rfc8599-push-params.cc`,
/// `RFC8599PushParams::parsePushParams`; RFC 8599 section 9 for `pn-param`):
///
/// - `pn-provider`: `apns` (production) or `apns.dev` (Apple's sandbox environment, what Linphone's debug builds register).
/// - `pn-param`: `[<team id>.]<bundle id>[.<services>]`. Services: `remote` (an ordinary device token), `voip` (a PushKit
///   token), or both as `voip&remote` in either order — Flexisip's grammar, which takes no service to mean `remote`;
///   `voip-ptt` and `complication` stand alone. The team id is a leading label of exactly 10 characters `[A-Z0-9]`
///   (Mizu's `pushnotification_teamid` is optional, so it may be absent); it is checked for shape only, as the
///   credentials come from the worker's configuration.
/// - `pn-prid`: one token per service, joined by `&`, each `<token>:<service>`; a single token may leave its service
///   out. Every service of `pn-param` has exactly one token.
///
/// Linphone's iOS clients register the dual form, `pn-param=TEAMID.bundle.voip&remote;pn-prid=<voip token>:voip&<remote token>:remote`.
struct APNsRFC8599Binding: Equatable {
    enum Service: String, CaseIterable, Sendable {
        case remote, voip
        case pushToTalk = "voip-ptt"
        case complication

        /// The push type a binding of this service alone demands; nil for `remote`, whose pushes follow the job's kind.
        var pushType: APNsPushType? {
            switch self {
            case .remote: nil
            case .voip: .voip
            case .pushToTalk: .pushtotalk
            case .complication: .complication
            }
        }
    }

    /// `pn-provider` values and the environment each names.
    static let providers: [String: APNsEnvironment] = ["apns": .production, "apns.dev": .sandbox]
    /// The services one binding may combine (Flexisip's `voip&remote`).
    static let combinable: Set<Service> = [.remote, .voip]

    var bundleId: String
    var environment: APNsEnvironment
    /// The services `pn-param` names, in its order.
    var services: [Service]
    /// The token of each service; empty for an unbound binding (`pn-prid=null`).
    var tokens: [Service: String]

    static func parse(_ binding: SIPBinding) throws(JobRejection) -> APNsRFC8599Binding {
        guard let environment = providers[binding.provider] else {
            throw binding.invalid("pn-provider \"\(binding.provider.prefix(16))\" is not one of apns, apns.dev")
        }
        let shape =
            "must be [<team id>.]<bundle id>[.<service>] for apns, the service one of "
            + Service.allCases.map(\.rawValue).joined(separator: ", ") + " or voip&remote"
        guard let param = binding.parameter else {
            throw binding.invalid("pn-param is required for apns: [<team id>.]<bundle id>[.<service>]")
        }
        var labels = param.split(separator: ".", omittingEmptySubsequences: false)
        guard !labels.contains(where: \.isEmpty) else { throw binding.invalid("pn-param \"\(param.prefix(128))\" \(shape)") }
        if let first = labels.first, first.utf8.count == 10, first.utf8.allSatisfy(\.isUppercaseAlphanumeric) {
            labels.removeFirst()
        }
        var services = [Service.remote]
        if let last = labels.last, let named = try serviceList(last, binding) {
            guard labels.count >= 2 else { throw binding.invalid("pn-param \"\(param.prefix(128))\" \(shape)") }
            services = named
            labels.removeLast()
        }
        guard !labels.isEmpty else { throw binding.invalid("pn-param \"\(param.prefix(128))\" \(shape)") }
        var tokens: [Service: String] = [:]
        if let prid = binding.token { tokens = try Self.tokens(prid, for: services, binding) }
        return APNsRFC8599Binding(bundleId: labels.joined(separator: "."), environment: environment, services: services, tokens: tokens)
    }

    /// The services of `pn-param`'s last label, or nil when it names none (then it is part of the bundle id).
    private static func serviceList(_ label: Substring, _ binding: SIPBinding) throws(JobRejection) -> [Service]? {
        let names = label.split(separator: "&", omittingEmptySubsequences: false)
        let services = names.compactMap { Service(rawValue: String($0)) }
        guard services.count == names.count else {
            // `voip&bogus`: a list of services with one Apple does not have, not a bundle id label.
            if names.count > 1 { throw binding.invalid("pn-param services \"\(label.prefix(64))\" must be voip, remote or voip&remote") }
            return nil
        }
        if services.count > 1, Set(services).count != services.count || !Set(services).isSubset(of: combinable) {
            throw binding.invalid("pn-param services \"\(label.prefix(64))\" must be voip, remote or voip&remote")
        }
        return services
    }

    /// `pn-prid` split into one token per service (Flexisip: `<token>[:<service>]` alone, `<token>:<service>` each of several).
    private static func tokens(_ prid: String, for services: [Service], _ binding: SIPBinding) throws(JobRejection) -> [Service: String] {
        let entries = prid.split(separator: "&", omittingEmptySubsequences: false)
        guard entries.count == services.count else {
            throw binding.invalid("pn-param names \(services.count) service(s) but pn-prid has \(entries.count) token(s)")
        }
        var tokens: [Service: String] = [:]
        for entry in entries {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            let service: Service
            if parts.count == 1, services.count == 1 {
                service = services[0]
            } else if parts.count == 2, let named = Service(rawValue: String(parts[1])) {
                service = named
            } else {
                throw binding.invalid("pn-prid must be <token>:<service> for each service of pn-param (joined by &)")
            }
            guard services.contains(service), tokens.updateValue(String(parts[0]), forKey: service) == nil else {
                throw binding.invalid("pn-prid's services do not match pn-param's")
            }
        }
        return tokens
    }
}

import PushCore

/// An RFC 8599 APNs binding as Flexisip and Linphone write it (Flexisip, `src/pushnotification/rfc8599-push-params.cc`,
/// `RFC8599PushParams::parsePushParams`; RFC 8599 section 9 for `pn-param`):
///
/// - `pn-provider`: `apns` or `apns.dev` (Flexisip's name for Apple's sandbox, what Linphone's debug builds register).
///   RFC 8599 defines only `apns`, so `apns` sends to production but does not say the token is a production one
///   (`APNsTarget.namesEnvironment`).
/// - `pn-param`: `[<team id>.]<bundle id>[.<services>]`. Services: `remote` (an ordinary device token), `voip` (a PushKit
///   token), or both as `voip&remote` in either order — Flexisip's grammar, which takes no service to mean `remote`;
///   `voip-ptt` and `complication` stand alone.
/// - The team id: Flexisip takes "all the characters before the first point" (`sPnParamRegex`), and liblinphone always
///   writes one — its default is the placeholder `ABCD1234` (`src/push-notification/push-notification-config.cpp`,
///   `mTeamId`), 8 characters, not Apple's 10. A Mizu client may send the bundle id alone (`pushnotification_teamid`
///   is optional, its guide's `pn-param` is "your Apple app Bundle ID"), so dropping the first label always would send
///   `com.example.chat` to `example.chat`. The rule: the first label is the team id **whenever the rest names a
///   configured app**. The configuration is the provider's, not the decoder's, so the binding's `app` is read by the
///   label's shape — a first label of upper-case letters and digits only (Apple's team ids, liblinphone's placeholder)
///   is a team id, a reverse-DNS label such as `com` is not — and the other reading is kept as
///   `alternativeBundleId`, which `APNsProvider` delivers to when it, and not `app`, is a configured app.
///   The team id is not checked further: credentials and their team come from the worker's configuration.
/// - `pn-prid`: one token per service, joined by `&`, each `<token>:<service>`; a single token may leave its service
///   out. Every service of `pn-param` has exactly one token.
///
/// liblinphone's iOS clients register the dual form (`PushNotificationConfig::generatePushParams`), `pn-param=ABCD1234.bundle.voip&remote;pn-prid=<voip token>:voip&<remote token>:remote`,
/// tokens in upper-case hex (`ios-app-delegate.mm`, `stringFromToken:forType:`).
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
    /// `pn-param` read the other way round: with its first label kept when `bundleId` dropped it as a team id, or
    /// dropped when `bundleId` kept it; nil when `bundleId` is a single label that was never a team id.
    var alternativeBundleId: String?
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
        var teamId: Substring?
        if let first = labels.first, first.utf8.allSatisfy(\.isUppercaseAlphanumeric) {
            teamId = labels.removeFirst()
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
        let bundleId = labels.joined(separator: ".")
        let alternative = teamId.map { "\($0).\(bundleId)" } ?? (labels.count > 1 ? labels.dropFirst().joined(separator: ".") : nil)
        return APNsRFC8599Binding(
            bundleId: bundleId, alternativeBundleId: alternative, environment: environment, services: services, tokens: tokens)
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

/// How a provider's targets are written in a job: the plugin's side of the job contract.
///
/// The core reads the fields every target has (`bindingId`, `provider`, `app`) and hands the rest of the
/// target object to the format of the provider it names. A format may also serve device bindings written
/// the way SIP servers store them (`SIPBinding`): it names the RFC 8599 `pn-provider` values and X-MPUSH
/// provider letters it answers for and turns such a binding into its app and details.
public protocol TargetFormat: Sendable {
    var provider: ProviderID { get }

    /// Reads and checks this provider's own members of a target object; the core refuses any member
    /// it leaves unread.
    func decode(_ fields: inout Fields) throws(JobRejection) -> any TargetDetails

    /// RFC 8599 `pn-provider` values this format serves.
    var rfc8599Providers: [String] { get }
    /// X-MPUSH provider letters this format serves, each with what it means (for the refusal of an unknown letter).
    var xmpushProviders: [(letter: String, meaning: String)] { get }

    /// Whether this format takes `binding`, one of the notations it serves, given the target's other members:
    /// two formats may serve one X-MPUSH letter (`w:` is Web Push with keys, an FCM web token without).
    func claims(_ binding: SIPBinding, _ fields: Fields) -> Bool

    /// A SIP binding string for one of those names, as this provider's target. `fields` holds the target's
    /// other members (Web Push keys, for example): members it leaves unread are refused. An unbound
    /// binding (`binding.token == nil`) has no token to check.
    func decode(_ binding: SIPBinding, _ fields: inout Fields) throws(JobRejection) -> (app: String?, details: any TargetDetails)

    /// Checks the job's `overrides.<provider>` object: the members this provider merges, and none that may
    /// change the device token, the authorization or the routing rules. Default: the provider takes none.
    func checkOverride(_ override: JSONValue) throws(JobRejection)
}

extension TargetFormat {
    public var rfc8599Providers: [String] { [] }
    public var xmpushProviders: [(letter: String, meaning: String)] { [] }

    public func claims(_ binding: SIPBinding, _ fields: Fields) -> Bool { true }

    public func checkOverride(_ override: JSONValue) throws(JobRejection) {
        throw JobRejection(.invalidField, "overrides.\(provider) is not supported: \(provider) payloads take no overrides")
    }

    /// Accepts an override whose members are objects named in `members` (e.g. `payload`, `message`) and
    /// nothing at `protected` (member paths, e.g. `["message", "token"]`).
    public func checkOverride(
        _ override: JSONValue, members: [String], protected: [[String]] = [],
        because reason: String = ""
    ) throws(JobRejection) {
        guard case .object(let entries) = override else { return }
        for (name, value) in entries {
            guard members.contains(name) else {
                throw JobRejection(
                    .invalidField, "overrides.\(provider).\(name) is not supported (\(provider) merges \(members.joined(separator: ", ")))")
            }
            guard case .object = value else {
                throw JobRejection(.invalidField, "overrides.\(provider).\(name) must be an object, not \(value.typeName)")
            }
        }
        try PayloadOverride.refuse(protected, in: override, provider: provider, because: reason)
    }

    public func decode(_ binding: SIPBinding, _ fields: inout Fields) throws(JobRejection) -> (app: String?, details: any TargetDetails) {
        throw binding.invalid("is not a notation \(provider) targets can be written in")
    }
}

/// The target formats a worker knows, by provider name and SIP notation.
public struct TargetFormats: Sendable {
    public private(set) var byProvider: [ProviderID: any TargetFormat] = [:]
    private var byRFC8599Provider: [String: [any TargetFormat]] = [:]
    private var byXMPushLetter: [String: [any TargetFormat]] = [:]

    public init(_ formats: [any TargetFormat] = []) {
        for format in formats { add(format) }
    }

    public mutating func add(_ format: any TargetFormat) {
        precondition(byProvider[format.provider] == nil, "two target formats for \(format.provider)")
        byProvider[format.provider] = format
        for name in format.rfc8599Providers { byRFC8599Provider[name, default: []].append(format) }
        for (letter, _) in format.xmpushProviders { byXMPushLetter[letter, default: []].append(format) }
    }

    public var providerNames: [String] { byProvider.keys.map(\.rawValue).sorted() }

    /// The format that takes `binding`: the first of those serving its name that claims it, else the first
    /// of them (whose decoding then says what is missing).
    func format(for binding: SIPBinding, _ fields: Fields) throws(JobRejection) -> any TargetFormat {
        switch binding.notation {
        case .rfc8599:
            guard let candidates = byRFC8599Provider[binding.provider], let first = candidates.first else {
                throw binding.invalid(
                    "pn-provider \"\(binding.provider.prefix(16))\" is not one of \(byRFC8599Provider.keys.sorted().joined(separator: ", "))"
                )
            }
            return candidates.first { $0.claims(binding, fields) } ?? first
        case .xmpush:
            guard let candidates = byXMPushLetter[binding.provider], let first = candidates.first else {
                let meanings = Dictionary(
                    byProvider.values.flatMap(\.xmpushProviders).map { ($0.letter, [$0.meaning]) }, uniquingKeysWith: +)
                let known = meanings.keys.sorted().map { "\($0) (\(meanings[$0]!.sorted().joined(separator: " or ")))" }
                throw binding.invalid("provider \"\(binding.provider.prefix(8))\" is not one of \(known.joined(separator: ", "))")
            }
            return candidates.first { $0.claims(binding, fields) } ?? first
        }
    }
}

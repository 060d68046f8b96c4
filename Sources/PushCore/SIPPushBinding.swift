/// A device binding written the way SIP servers store it, decoded into the native
/// target fields: RFC 8599 Contact parameters (`pn-provider`, `pn-param`, `pn-prid`)
/// or the Mizu gateway's `X-MPUSH` header value (`[env:]provider:package:token`).
///
/// A token of `null` (RFC 8599 `pn-prid=null`, X-MPUSH `…:null`) means the device
/// unbound itself: the binding is decoded with `token == nil` and the pipeline answers
/// `rejected` + `remove_binding` without a send.
public struct SIPPushBinding: Sendable, Equatable {
    public var provider: ProviderID
    /// APNs bundle id, FCM project id (X-MPUSH: the package name); nil for Web Push.
    public var app: String?
    /// Device token, FCM registration token or Web Push endpoint; nil when unbound.
    public var token: String?
    /// APNs `production` or `sandbox` (X-MPUSH `p:` / `s:` prefix).
    public var environment: String?
    /// APNs push type the binding demands (RFC 8599 service `voip` → `voip`).
    public var pushType: String?
    /// FCM platform (`android`, `ios`, `web`) when the notation says it (X-MPUSH `a`, `j`).
    public var platform: String?

    public var isUnbound: Bool { token == nil }

    public init(provider: ProviderID, app: String? = nil, token: String?, environment: String? = nil,
                pushType: String? = nil, platform: String? = nil) {
        self.provider = provider
        self.app = app
        self.token = token
        self.environment = environment
        self.pushType = pushType
        self.platform = platform
    }

    /// Why a binding string was refused; the text names the part and the rule.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The token value SIP clients send to unbind.
    static let unboundToken = "null"
}

// MARK: - RFC 8599

extension SIPPushBinding {
    /// RFC 8599 APNs services (the last label of `pn-param`) and the push type each selects.
    public static let apnsServices: [String: String] = ["voip": "voip", "voip-ptt": "pushtotalk", "complication": "complication"]

    /// Decodes `pn-provider=…;pn-param=…;pn-prid=…` (the Contact URI parameters, in any
    /// order, names case-insensitive, values percent-decoded).
    ///
    /// - `apns`: `pn-param` is `<team id>.<bundle id>.<service>` (RFC 8599 section 9): the
    ///   10-character team id, the bundle id (which selects the app), and the service —
    ///   `voip` selects the VoIP push type and the `.voip` topic. The team id is checked for
    ///   shape only: credentials (and their team) come from the worker's configuration. Gateways
    ///   may leave the team id out (Mizu's `pushnotification_teamid` is optional): a leading
    ///   label of exactly 10 characters `[A-Z0-9]` is the team id, otherwise the bundle id starts at once.
    /// - `fcm`: `pn-param` is the Firebase project id (which selects the app).
    /// - `webpush`: `pn-prid` is the subscription endpoint; `pn-param` is not used.
    public static func rfc8599(_ text: String) throws(Invalid) -> SIPPushBinding {
        var parameters: [String: String] = [:]
        for part in text.split(separator: ";", omittingEmptySubsequences: false) {
            guard let equals = part.firstIndex(of: "=") else {
                // The text may be the device token itself: it is not repeated into logs and dead-letter headers.
                throw Invalid("a parameter is not name=value")
            }
            let name = part[..<equals].lowercased()
            guard ["pn-provider", "pn-param", "pn-prid"].contains(name) else {
                throw Invalid("parameter \(name) is not one of pn-provider, pn-param, pn-prid")
            }
            guard let value = percentDecoded(part[part.index(after: equals)...]), !value.isEmpty else {
                throw Invalid("\(name) has an empty or badly percent-encoded value")
            }
            guard parameters.updateValue(value, forKey: name) == nil else { throw Invalid("\(name) appears twice") }
        }
        guard let providerName = parameters["pn-provider"] else { throw Invalid("pn-provider is required") }
        guard let prid = parameters["pn-prid"] else { throw Invalid("pn-prid is required (null to unbind)") }
        let token = prid == unboundToken ? nil : prid
        switch providerName {
        case "apns":
            guard let param = parameters["pn-param"] else {
                throw Invalid("pn-param is required for apns: [<team id>.]<bundle id>.<service>")
            }
            var labels = param.split(separator: ".", omittingEmptySubsequences: false)
            guard !labels.contains(where: \.isEmpty) else {
                throw Invalid("pn-param \"\(param)\" must be [<team id>.]<bundle id>.<service> for apns")
            }
            if let first = labels.first, first.utf8.count == 10, first.utf8.allSatisfy({ $0.isUppercaseAlphanumeric }) {
                labels.removeFirst()
            }
            guard labels.count >= 2 else {
                throw Invalid("pn-param \"\(param)\" must be [<team id>.]<bundle id>.<service> for apns")
            }
            let service = String(labels[labels.count - 1])
            guard let pushType = apnsServices[service] else {
                throw Invalid("pn-param service \"\(service)\" is not one of \(apnsServices.keys.sorted().joined(separator: ", "))")
            }
            return SIPPushBinding(provider: .apns, app: labels[..<(labels.count - 1)].joined(separator: "."), token: token,
                                  pushType: pushType)
        case "fcm":
            guard let project = parameters["pn-param"] else { throw Invalid("pn-param (the Firebase project id) is required for fcm") }
            return SIPPushBinding(provider: .fcm, app: project, token: token)
        case "webpush":
            return SIPPushBinding(provider: .webpush, token: token)
        default:
            throw Invalid("pn-provider \"\(providerName.prefix(16))\" is not one of apns, fcm, webpush")
        }
    }

    /// `%XX` escapes decoded (SIP URI parameter values); nil for a broken escape or invalid UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(\.hexValue), let low = iterator.next().flatMap(\.hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

// MARK: - X-MPUSH

extension SIPPushBinding {
    /// X-MPUSH environment prefixes: `s` sandbox, `p` production, `d` the default.
    public static let xmpushEnvironments: [String: String?] = ["s": "sandbox", "p": "production", "d": nil]

    /// Decodes Mizu's `X-MPUSH` header value `[env:]provider:package:token`.
    ///
    /// Providers: `a` Android via FCM, `i` iOS via APNs, `j` iOS via FCM, `w` Web Push. The
    /// package is the APNs bundle id or FCM project id (ignored for `w`); the token is
    /// everything after the third field, colons included (FCM tokens contain them; a Web
    /// Push token is the endpoint URL). `s:`/`p:` choose the APNs environment.
    public static func xmpush(_ text: String) throws(Invalid) -> SIPPushBinding {
        var rest = Substring(text)
        var environment: String?
        if let colon = rest.firstIndex(of: ":"), rest.distance(from: rest.startIndex, to: colon) == 1,
           let chosen = xmpushEnvironments[String(rest[..<colon])] {
            environment = chosen
            rest = rest[rest.index(after: colon)...]
        }
        let parts = rest.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Invalid("must be [s|p|d:]provider:package:token") }
        let package = String(parts[1]), tokenText = String(parts[2])
        guard !tokenText.isEmpty else { throw Invalid("the token is empty (null to unbind)") }
        let token = tokenText == unboundToken ? nil : tokenText
        switch parts[0] {
        case "a", "j":
            guard !package.isEmpty else { throw Invalid("the package (Firebase project id) is empty") }
            return SIPPushBinding(provider: .fcm, app: package, token: token, platform: parts[0] == "a" ? "android" : "ios")
        case "i":
            guard !package.isEmpty else { throw Invalid("the package (bundle id) is empty") }
            return SIPPushBinding(provider: .apns, app: package, token: token, environment: environment)
        case "w":
            return SIPPushBinding(provider: .webpush, token: token)
        default:
            throw Invalid("provider \"\(parts[0].prefix(8))\" is not one of a (Android FCM), i (APNs), j (iOS FCM), w (Web Push)")
        }
    }
}

extension UInt8 {
    var hexValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    var isUppercaseAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}

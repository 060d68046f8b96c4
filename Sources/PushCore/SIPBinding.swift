/// A device binding written the way SIP servers store it, split into its parts; the target format of
/// the provider it names (`TargetFormat.decode(_:_:)`) says what the parts mean.
///
/// - RFC 8599 Contact parameters `pn-provider=…;pn-param=…;pn-prid=…` (any order, names
///   case-insensitive, values percent-decoded): `provider` is `pn-provider`, `parameter` is `pn-param`,
///   `token` is `pn-prid`. Other `pn-` parameters are ignored, as Flexisip ignores them: liblinphone appends
///   `pn-silent`, `pn-timeout`, `pn-msg-str`, `pn-call-str`, `pn-groupchat-str`, `pn-call-snd`, `pn-msg-snd`
///   (and `pn-call-remote-push-interval`) to every registration (`src/push-notification/push-notification-config.cpp`,
///   `src/account/account.cpp`), and RFC 8599 reserves the `pn-` prefix for push parameters.
/// - Mizu's `X-MPUSH` header value `[env:]provider:package:token`: `provider` is the letter,
///   `parameter` the package, `environment` the one-letter prefix (`s`, `p`, `d`) if given, `token`
///   everything after the third field, colons included (FCM tokens contain them; a Web Push token is
///   the endpoint URL).
///
/// Every part is an identifier (`Fields.Content.identifier`) once decoded: a control character in the
/// provider, parameter or token — an RFC 8599 `%0A` included — refuses the binding, since the parts
/// become the target's app, token and environment, which reach headers, URLs and logs.
///
/// A token of `null` (RFC 8599 `pn-prid=null`, X-MPUSH `…:null`) means the device unbound itself:
/// `token` is nil and the pipeline answers `rejected` + `remove_binding` without a send. The Mizu
/// seed's unregister, an X-MPUSH value of just `null`, names no provider at all (`isBareUnbind`):
/// its outcome's provider is `none`.
public struct SIPBinding: Sendable, Equatable {
    public enum Notation: String, Sendable, CaseIterable {
        case rfc8599, xmpush
    }

    public var notation: Notation
    /// `pn-provider`, or the X-MPUSH provider letter.
    public var provider: String
    /// `pn-param`, or the X-MPUSH package; nil when absent or empty.
    public var parameter: String?
    /// The device token; nil when unbound.
    public var token: String?
    /// The X-MPUSH environment prefix (`s`, `p`, `d`) if given.
    public var environment: String?
    /// Where the binding stands in the job (`targets[0].`), for refusals.
    public var path: String

    public var isUnbound: Bool { token == nil }
    /// X-MPUSH `null` alone: unbound, with no provider, package or token.
    public var isBareUnbind: Bool { notation == .xmpush && provider.isEmpty && token == nil }

    /// The provider of a bare unbind's target and outcome.
    public static let bareUnbindProvider: ProviderID = .unnamed

    public init(
        notation: Notation, provider: String, parameter: String? = nil, token: String?, environment: String? = nil,
        path: String = ""
    ) {
        self.notation = notation
        self.provider = provider
        self.parameter = parameter
        self.token = token
        self.environment = environment
        self.path = path
    }

    /// A refusal of this binding string: `<path><notation> <rule>`.
    public func invalid(_ rule: String) -> JobRejection {
        JobRejection(.invalidField, "\(path)\(notation.rawValue) \(rule)")
    }

    /// The token value SIP clients send to unbind.
    static let unboundToken = "null"

    public static func parse(_ text: String, notation: Notation, path: String = "") throws(JobRejection) -> SIPBinding {
        let binding =
            switch notation {
            case .rfc8599: try rfc8599(text, path: path)
            case .xmpush: try xmpush(text, path: path)
            }
        for (part, value) in [("provider", binding.provider), ("parameter", binding.parameter), ("token", binding.token)]
        where value?.containsControlCharacter == true {
            // The value is not repeated: the token may be a device token.
            throw binding.invalid("\(part) contains a control character (CR, LF, tab, …) once decoded: it can reach an HTTP header")
        }
        return binding
    }

    /// The parameters a binding is read from; every other `pn-` parameter is ignored.
    static let rfc8599Parameters = ["pn-provider", "pn-param", "pn-prid"]

    /// Each parameter is `name=value`. The three of `rfc8599Parameters` must each appear once (a second one is refused:
    /// which would be meant?); any other `pn-` parameter is skipped unread and unstored, so neither its count nor its
    /// size costs more than the text's own bound. A parameter outside the `pn-` namespace (`transport=tls`, `ob`, a
    /// `+sip.instance`) is refused: the member holds the push parameters, and such a one says the producer copied
    /// something else — the whole Contact, with the user's address — which is not guessed at.
    static func rfc8599(_ text: String, path: String) throws(JobRejection) -> SIPBinding {
        func invalid(_ rule: String) -> JobRejection { JobRejection(.invalidField, "\(path)rfc8599 \(rule)") }
        var parameters: [String: String] = [:]
        for part in text.split(separator: ";", omittingEmptySubsequences: false) {
            guard let equals = part.firstIndex(of: "=") else {
                // The text may be the device token itself: it is not repeated into logs and dead-letter headers.
                throw invalid("a parameter is not name=value")
            }
            let name = part[..<equals].lowercased()
            guard rfc8599Parameters.contains(name) else {
                guard name.hasPrefix("pn-") else {
                    throw invalid(
                        "parameter \(name.prefix(32)) is not a push parameter (pn-provider, pn-param, pn-prid, other pn-* ignored)")
                }
                continue
            }
            guard let value = percentDecoded(part[part.index(after: equals)...]), !value.isEmpty else {
                throw invalid("\(name) has an empty or badly percent-encoded value")
            }
            guard parameters.updateValue(value, forKey: name) == nil else { throw invalid("\(name) appears twice") }
        }
        guard let provider = parameters["pn-provider"] else { throw invalid("pn-provider is required") }
        guard let prid = parameters["pn-prid"] else { throw invalid("pn-prid is required (null to unbind)") }
        return SIPBinding(
            notation: .rfc8599, provider: provider, parameter: parameters["pn-param"],
            token: prid == unboundToken ? nil : prid, path: path)
    }

    /// X-MPUSH environment prefixes: `s` sandbox, `p` production, `d` the default.
    public static let xmpushEnvironments: Set<String> = ["s", "p", "d"]

    static func xmpush(_ text: String, path: String) throws(JobRejection) -> SIPBinding {
        func invalid(_ rule: String) -> JobRejection { JobRejection(.invalidField, "\(path)xmpush \(rule)") }
        if text == unboundToken { return SIPBinding(notation: .xmpush, provider: "", token: nil, path: path) }
        var rest = Substring(text)
        var environment: String?
        if let colon = rest.firstIndex(of: ":"), rest.distance(from: rest.startIndex, to: colon) == 1,
            xmpushEnvironments.contains(String(rest[..<colon]))
        {
            environment = String(rest[..<colon])
            rest = rest[rest.index(after: colon)...]
        }
        let parts = rest.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw invalid("must be [s|p|d:]provider:package:token") }
        let tokenText = String(parts[2])
        guard !tokenText.isEmpty else { throw invalid("the token is empty (null to unbind)") }
        return SIPBinding(
            notation: .xmpush, provider: String(parts[0]), parameter: parts[1].isEmpty ? nil : String(parts[1]),
            token: tokenText == unboundToken ? nil : tokenText, environment: environment, path: path)
    }

    /// `%XX` escapes decoded (SIP URI parameter values); nil for a broken escape or invalid UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(\.hexValue), let low = iterator.next().flatMap(\.hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
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

    public var isUppercaseAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}

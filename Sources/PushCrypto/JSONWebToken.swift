import PushCore

/// Compact JWS (RFC 7515) for the tokens providers want: APNs (ES256), FCM OAuth
/// assertions (RS256), VAPID (ES256).
public enum JSONWebToken {
    public enum Algorithm: String, Sendable {
        case es256 = "ES256"
        case rs256 = "RS256"
    }

    /// `base64url(header).base64url(claims).base64url(signature)`; `header` gets `alg` and `typ` first.
    public static func sign(
        algorithm: Algorithm, headerFields: [(String, String)] = [],
        claims: (inout JSONWriter) -> Void, key: PrivateKey
    ) throws(CryptoError) -> String {
        var header = JSONWriter(capacity: 64)
        header.beginObject()
        header.member("alg", algorithm.rawValue)
        for (name, value) in headerFields { header.member(name, value) }
        header.endObject()
        var body = JSONWriter(capacity: 128)
        body.beginObject()
        claims(&body)
        body.endObject()
        let signingInput = Base64URL.encode(header.bytes) + "." + Base64URL.encode(body.bytes)
        let signature: [UInt8] =
            switch algorithm {
            case .es256: try key.signES256(Array(signingInput.utf8))
            case .rs256: try key.signRS256(Array(signingInput.utf8))
            }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// A token split into its parts, for verification (sandboxes).
    public struct Parsed: Sendable {
        public let header: JSONValue
        public let claims: JSONValue
        public let signingInput: [UInt8]
        public let signature: [UInt8]

        public func verifies(with key: PublicKey) -> Bool {
            switch header["alg"] {
            case .string("ES256")?: key.verifyES256(signingInput, signature: signature)
            case .string("RS256")?: key.verifyRS256(signingInput, signature: signature)
            default: false
            }
        }
    }

    public static func parse(_ token: String) -> Parsed? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
            let claimBytes = Base64URL.decode(String(parts[1])), let signature = Base64URL.decode(String(parts[2])),
            let header = try? JSONParser.parse(headerBytes), let claims = try? JSONParser.parse(claimBytes)
        else { return nil }
        return Parsed(header: header, claims: claims, signingInput: Array("\(parts[0]).\(parts[1])".utf8), signature: signature)
    }
}
